import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Metric, Schema, Stream } from "effect"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import * as Migration from "@cairn/catalog/Migration"
import type { Filter } from "@cairn/domain/QueryDocument"
import { SyncMessage, type SyncScope } from "@cairn/domain/Sync"
import type { Principal } from "@cairn/domain/Principal"
import type { Database } from "@cairn/store/Databases"
import { Log, Position } from "@cairn/store"
import { SyncMetrics } from "@cairn/sync"
import { Sync } from "@cairn/sync/Sync"
import * as SyncCursor from "@cairn/sync/SyncCursor"
import { SyncLiveSink } from "@cairn/domain/SyncLiveSink"
import { applyBatch, changesOnce, engineLayer, secret, snapshotAll } from "./support/harness.js"
import { database, everything, idOf, run, tempDir, viewOf, visibleTo, who } from "./support/tracker.js"

const alice = who("alice")
const bob = who("bob")
const carol = who("carol")
const erin = who("erin", { roles: ["admin"] })

const withEngine = <A, E, R>(effect: Effect.Effect<A, E, R>, config: Parameters<typeof engineLayer>[1] = {}) =>
  Effect.flatMap(tempDir, (dir) => Effect.provide(effect, engineLayer(dir, config)))

/** Two projects: P1 (alice owner, carol viewer) with a task and a comment, P2 (bob) with a task. */
const seed = Effect.gen(function* () {
  const p1 = idOf(yield* run(alice, "Project", "create", { name: "Apollo" }))
  const p2 = idOf(yield* run(bob, "Project", "create", { name: "Borealis" }))
  const carolMember = idOf(yield* run(alice, "Member", "add", { projectId: p1, subject: "carol", role: "viewer", email: "carol@example.com" }))
  const t1 = idOf(yield* run(alice, "Task", "create", { projectId: p1, title: "Launch" }))
  const t2 = idOf(yield* run(bob, "Task", "create", { projectId: p2, title: "Secret" }))
  const c1 = idOf(yield* run(alice, "Comment", "add", { taskId: t1, body: "Go" }))
  return { p1, p2, carolMember, t1, t2, c1 }
})

const kinds = (messages: ReadonlyArray<SyncMessage>) =>
  messages.flatMap((m) => (m._tag === "SyncBatch" ? m.changes.map((c) => `${c._tag} ${c.entity}/${c.id}`) : [`Resnapshot ${m.reason}`]))

const tasksOnly: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }

/** A live stream per caller from its snapshot's checkpoint, collected until the batch ending at `position`. */
const liveUntil = (sync: Sync, db: Database, callers: ReadonlyArray<Principal>, scope: SyncScope, position: number) =>
  Effect.forEach(callers, (caller) =>
    Effect.gen(function* () {
      const snap = yield* snapshotAll(db, caller, scope)
      const view = yield* viewOf(caller)
      const fiber = yield* sync.changes(caller, view, db, { scope, cursor: snap.checkpoint.cursor }).pipe(
        Stream.takeUntil((m) => m._tag === "SyncBatch" && m.checkpoint.position === Position.encode(position)),
        Stream.runCollect,
        Effect.fork
      )
      /** The stream's batches, each checked to be the caller's and applied to its snapshot. */
      const received = Effect.map(Fiber.join(fiber), (collected) => {
        const messages = Chunk.toReadonlyArray(collected)
        for (const m of messages) {
          assert.strictEqual(m._tag, "SyncBatch")
          if (m._tag === "SyncBatch") assert.strictEqual(m.checkpoint.subject, caller.subject)
          applyBatch(snap.records, m)
        }
        return messages
      })
      return { caller, snap, received }
    })
  )

describe("snapshot", () => {
  it.scoped("pages hold exactly what the principal may see, with hidden fields stripped", () =>
    withEngine(
      Effect.gen(function* () {
        yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, carol)
        assert.isAbove(snap.pages.length, 2)
        for (const page of snap.pages) assert.isAtMost(page.records.length, 2)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))
        assert.deepStrictEqual(
          [...snap.records.keys()].map((k) => k.split("/")[0]).sort(),
          ["Comment", "Member", "Member", "Project", "Task"]
        )
        for (const [key, record] of snap.records) if (key.startsWith("Member/")) assert.notProperty(record, "email")
        assert.strictEqual(snap.checkpoint.subject, "carol")
        assert.strictEqual(snap.checkpoint.position, Position.encode(6))
        assert.notInclude(snap.checkpoint.database, "org-acme")

        const admin = yield* snapshotAll(db, erin)
        assert.deepStrictEqual(admin.records, yield* visibleTo(db, erin))
        assert.strictEqual(admin.records.size, 8)
        assert.isTrue([...admin.records].some(([k, r]) => k.startsWith("Member/") && r["email"] === "carol@example.com"))
      }),
      { pageRows: 2 }
    ))

  it.scoped("a filtered scope holds only matching records; filters are checked against the view", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, t1 } = yield* seed
        yield* run(alice, "Task", "create", { projectId: p1, title: "Done soon" })
        yield* run(alice, "Task", "complete", {}, t1)
        const db = yield* database()
        const open: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["status"], value: "open" } }] }
        const snap = yield* snapshotAll(db, carol, open)
        assert.deepStrictEqual([...snap.records.values()].map((r) => r["title"]), ["Done soon"])

        const sync = yield* Sync
        const view = yield* viewOf(carol)
        const attempt = (scope: SyncScope) => Effect.flip(sync.snapshot(carol, view, db, { scope }))
        const unknown = yield* attempt({ entities: [{ from: { kind: "entity", name: "Nope" } }] })
        assert.strictEqual(unknown._tag, "Inaccessible")
        const hidden = yield* attempt({ entities: [{ from: { kind: "entity", name: "Member" }, where: { op: "eq", path: ["email"], value: "x@y.z" } }] })
        const missing = yield* attempt({ entities: [{ from: { kind: "entity", name: "Member" }, where: { op: "eq", path: ["phone"], value: "x@y.z" } }] })
        assert.strictEqual(hidden._tag, "InvalidQuery")
        // A hidden field reads exactly like a field that does not exist.
        assert.strictEqual(
          JSON.stringify(hidden).replace("email", "FIELD"),
          JSON.stringify(missing).replace("phone", "FIELD")
        )
        const through = yield* attempt({ entities: [{ from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["project", "name"], value: "Apollo" } }] })
        assert.strictEqual(through._tag, "InvalidQuery")
        const twice = yield* attempt({ entities: [{ from: { kind: "entity", name: "Task" } }, { from: { kind: "entity", name: "Task" } }] })
        assert.strictEqual(twice._tag, "InvalidQuery")
        // ifCatalog is checked once by the engine (DataPlane) for every verb; sync itself does not look at it.
        const stale = yield* sync.snapshot(carol, view, db, { scope: tasksOnly, ifCatalog: "stale" })
        assert.strictEqual(stale.checkpoint?.catalogToken, view.token)
      })
    ))

  it.scoped("a scope built in code is held to the query filter budgets too, without overflowing", () =>
    withEngine(
      Effect.gen(function* () {
        yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const view = yield* viewOf(carol)
        const leaf: Filter = { op: "eq", path: ["title"], value: "x" }
        let deep: Filter = leaf
        for (let i = 0; i < 3_000; i++) deep = { op: "not", filter: deep }
        const wide: Filter = { op: "or", filters: Array.from({ length: 20_000 }, (_, i) => ({ ...leaf, value: `t${i}` })) }
        const long: Filter = { op: "in", path: ["title"], value: Array.from({ length: 60_000 }, (_, i) => `t${i}`) }
        for (const [where, limit] of [[deep, "maxFilterNodes"], [wide, "maxFilterNodes"], [long, "maxInValues"]] as const) {
          const scope: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" }, where }] }
          const snapshot = yield* Effect.flip(sync.snapshot(carol, view, db, { scope }))
          assert.strictEqual(snapshot._tag === "QueryBudgetExceeded" && snapshot.limit, limit)
          const changes = yield* Effect.flip(Stream.runCollect(sync.changes(carol, view, db, { scope, cursor: "c", live: false })))
          assert.strictEqual(changes._tag === "QueryBudgetExceeded" && changes.limit, limit)
        }
      })
    ))

  it.scoped("continuations are sealed and bound to the caller; the snapshot size limit holds", () =>
    withEngine(
      Effect.gen(function* () {
        yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const view = yield* viewOf(carol)
        const first = yield* sync.snapshot(carol, view, db, { scope: everything })
        assert.isString(first.next)
        const tampered = first.next!.slice(0, -2) + (first.next!.endsWith("A") ? "BB" : "AA")
        assert.strictEqual((yield* Effect.flip(sync.snapshot(carol, view, db, { scope: everything, after: tampered })))._tag, "InvalidQuery")
        const stolen = yield* Effect.flip(sync.snapshot(bob, yield* viewOf(bob), db, { scope: everything, after: first.next! }))
        assert.strictEqual(stolen._tag, "InvalidQuery")
        const otherScope = yield* Effect.flip(sync.snapshot(carol, view, db, { scope: tasksOnly, after: first.next! }))
        assert.strictEqual(otherScope._tag, "InvalidQuery")

        const tooBig = yield* Effect.flip(snapshotAll(db, erin))
        assert.strictEqual(tooBig._tag, "QueryBudgetExceeded")
        assert.strictEqual((tooBig as { limit: string }).limit, "snapshot size")
      }),
      { pageRows: 2, maxSnapshotRows: 5 }
    ))
})

describe("changes", () => {
  it.scoped("a snapshot whose pages span commits converges: a record created after its start and gone from view before its end is not kept", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, p2, t1 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const view = yield* viewOf(carol)
        // Page 1 at the snapshot's start (position 6): t1 only.
        const first = yield* sync.snapshot(carol, view, db, { scope: tasksOnly })
        assert.deepStrictEqual(first.records.map((r) => r.id), [t1])
        // A task carol may see is created after the start, read by the next page, then moved out of her view.
        const t3 = idOf(yield* run(alice, "Task", "create", { projectId: p1, title: "Transient" }))
        const renamed = idOf(yield* run(alice, "Task", "create", { projectId: p1, title: "Before" }))
        yield* run(alice, "Task", "rename", { title: "Between" }, t1)
        const records = new Map<string, Record<string, unknown>>()
        for (const r of first.records) records.set(`${r.entity}/${r.id}`, { ...r.record })
        let page = yield* sync.snapshot(carol, view, db, { scope: tasksOnly, after: first.next! })
        for (const r of page.records) records.set(`${r.entity}/${r.id}`, { ...r.record })
        yield* run(erin, "Task", "move", { projectId: p2 }, t3)
        yield* run(alice, "Task", "rename", { title: "After" }, renamed)
        yield* run(alice, "Task", "rename", { title: "Launch" }, t1)
        while (page.checkpoint === undefined) {
          page = yield* sync.snapshot(carol, view, db, { scope: tasksOnly, after: page.next! })
          for (const r of page.records) records.set(`${r.entity}/${r.id}`, { ...r.record })
        }
        assert.strictEqual(page.checkpoint.position, Position.encode(6))
        for (const m of yield* changesOnce(db, carol, page.checkpoint.cursor, tasksOnly, view)) applyBatch(records, m)
        const expected = new Map([...(yield* visibleTo(db, carol, tasksOnly))].filter(([k]) => k.startsWith("Task/")))
        assert.isFalse(records.has(`Task/${t3}`))
        assert.deepStrictEqual(records, expected)
      }),
      { pageRows: 1 }
    ))

  it.scoped("a resume delivers exactly the authorized changes, in one batch with a new checkpoint", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, p2, t1, t2 } = yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, carol)
        const resumesBefore = (yield* Metric.value(SyncMetrics.resumes)).count

        yield* run(alice, "Task", "rename", { title: "Launch!" }, t1)
        yield* run(bob, "Task", "rename", { title: "Still secret" }, t2)
        const t3 = idOf(yield* run(alice, "Task", "create", { projectId: p1, title: "Leaves" }))
        yield* run(alice, "Task", "move", { projectId: p2 }, t3)
        yield* run(bob, "Task", "move", { projectId: p1 }, t2)
        const dave = idOf(yield* run(alice, "Member", "add", { projectId: p1, subject: "dave", role: "editor", email: "dave@example.com" }))
        const c2 = idOf(yield* run(alice, "Comment", "add", { taskId: t1, body: "Soon" }))
        yield* run(erin, "Project", "archive", {}, p2)

        const messages = yield* changesOnce(db, carol, snap.checkpoint.cursor)
        assert.strictEqual(messages.length, 1)
        // t3 entered and left within the range: the client never learns of it.
        assert.deepStrictEqual(kinds(messages), [`Upsert Task/${t1}`, `Upsert Task/${t2}`, `Upsert Member/${dave}`, `Upsert Comment/${c2}`])
        const batch = messages[0]!
        assert.strictEqual(batch._tag, "SyncBatch")
        if (batch._tag !== "SyncBatch") return
        assert.notProperty(batch.changes.find((c) => c.id === dave && c._tag === "Upsert")!, "email")
        assert.notProperty((batch.changes.find((c) => c.id === dave)! as { record: object }).record, "email")
        assert.strictEqual(batch.checkpoint.position, Position.encode(14))
        applyBatch(snap.records, batch)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))
        assert.strictEqual((yield* Metric.value(SyncMetrics.resumes)).count, resumesBefore + 1)

        // Leaving the view is a removal; nothing new is an empty batch at the same position.
        yield* run(erin, "Task", "move", { projectId: p2 }, t2)
        const leave = yield* changesOnce(db, carol, batch.checkpoint.cursor)
        assert.deepStrictEqual(kinds(leave), [`Remove Task/${t2}`])
        const idle = yield* changesOnce(db, carol, (leave[0] as { checkpoint: { cursor: string } }).checkpoint.cursor)
        assert.deepStrictEqual(kinds(idle), [])
        assert.strictEqual((idle[0] as { checkpoint: { position: string } }).checkpoint.position, Position.encode(15))

        // Moving a task that has comments changes what its untouched comments mean: resnapshot.
        yield* run(alice, "Task", "move", { projectId: p2 }, t1)
        assert.deepStrictEqual(kinds(yield* changesOnce(db, carol, (idle[0] as { checkpoint: { cursor: string } }).checkpoint.cursor)), [
          "Resnapshot access_changed"
        ])
      })
    ))

  it.scoped("a cursor resumes only for its principal, database, scope, catalog and access", () =>
    withEngine(
      Effect.gen(function* () {
        yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, carol)
        const cursor = snap.checkpoint.cursor
        const reason = (messages: ReadonlyArray<SyncMessage>) => (messages.length === 1 && messages[0]!._tag === "Resnapshot" ? messages[0]!.reason : "none")

        assert.strictEqual(reason(yield* changesOnce(db, bob, cursor)), "cursor_mismatch")
        const otherOrg = who("carol", { org: "org-other" })
        assert.strictEqual(reason(yield* changesOnce(yield* database("org-other"), otherOrg, cursor)), "cursor_mismatch")
        assert.strictEqual(reason(yield* changesOnce(db, carol, cursor, tasksOnly)), "cursor_mismatch")
        assert.strictEqual(reason(yield* changesOnce(db, carol, cursor.slice(0, -3) + "AAA")), "cursor_mismatch")
        assert.strictEqual(reason(yield* changesOnce(db, who("carol", { roles: ["admin"] }), cursor)), "access_changed")
        const view = yield* viewOf(carol)
        // A change that leaves the scope's definitions as they were keeps the cursor (here: another policy digest)...
        const samePolicyView = new View(view.catalog.withPolicyDigest("another policy"), view.rules)
        assert.strictEqual(reason(yield* changesOnce(db, carol, cursor, everything, samePolicyView)), "none")
        // ...a migrated (incompatible) change to one of them does not.
        const migrated = view.catalog.withMigrations([Migration.make({ name: "retype-task", description: "Task changed.", covers: ["Task.title"] })])
        const changedCatalog = new View(migrated, view.rules)
        assert.strictEqual(reason(yield* changesOnce(db, carol, cursor, everything, changedCatalog)), "catalog_changed")
        assert.strictEqual(reason(yield* changesOnce(db, carol, cursor)), "none")
        const counted = yield* Metric.value(Metric.tagged(SyncMetrics.resnapshots, "reason", "cursor_mismatch"))
        assert.isAtLeast(counted.count, 4)
      })
    ))

  it.scoped("the principal's own membership change resnapshots; other members' changes do not", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, p2, carolMember } = yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, carol)
        let cursor = snap.checkpoint.cursor
        const step = Effect.gen(function* () {
          const messages = yield* changesOnce(db, carol, cursor)
          const last = messages[messages.length - 1]!
          if (last._tag === "SyncBatch") {
            applyBatch(snap.records, last)
            cursor = last.checkpoint.cursor
          }
          return messages
        })

        yield* run(alice, "Member", "add", { projectId: p1, subject: "dave", role: "viewer", email: "d@example.com" })
        yield* run(bob, "Member", "add", { projectId: p2, subject: "frank", role: "viewer", email: "f@example.com" })
        yield* run(alice, "Member", "setRole", { role: "editor" }, carolMember)
        const routine = yield* step
        assert.strictEqual(routine[0]!._tag, "SyncBatch")
        assert.strictEqual(kinds(routine).length, 2)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))

        yield* run(alice, "Member", "remove", {}, carolMember)
        const revoked = yield* step
        assert.deepStrictEqual(kinds(revoked), ["Resnapshot access_changed"])
        const again = yield* snapshotAll(db, carol)
        assert.deepStrictEqual([...again.records.keys()], [])

        yield* run(bob, "Member", "add", { projectId: p2, subject: "carol", role: "viewer", email: "c@example.com" })
        assert.deepStrictEqual(kinds(yield* changesOnce(db, carol, again.checkpoint.cursor)), ["Resnapshot access_changed"])
        const granted = yield* snapshotAll(db, carol)
        assert.isTrue([...granted.records.values()].some((r) => r["name"] === "Borealis"))
        assert.deepStrictEqual(granted.records, yield* visibleTo(db, carol))
      })
    ))

  it.scoped("a record changed in the same range as a revocation is removed, judged as the client last saw it", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, carolMember } = yield* seed
        const db = yield* database()
        // Only tasks: no untouched project row reveals the revocation, so t1's own change must.
        const snap = yield* snapshotAll(db, carol, tasksOnly)
        assert.deepStrictEqual([...snap.records.keys()], [`Task/${t1}`])
        yield* run(alice, "Member", "remove", {}, carolMember)
        yield* run(alice, "Task", "rename", { title: "After revocation" }, t1)
        const messages = yield* changesOnce(db, carol, snap.checkpoint.cursor, tasksOnly)
        assert.deepStrictEqual(kinds(messages), [`Remove Task/${t1}`])
        applyBatch(snap.records, messages[0]!)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol, tasksOnly))
      })
    ))

  it.scoped("compaction keeps positions and receipts but sends older cursors to a resnapshot", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1 } = yield* seed
        const db = yield* database()
        const old = yield* snapshotAll(db, carol)
        for (let i = 0; i < 5; i++) yield* run(alice, "Task", "rename", { title: `Launch ${i}` }, t1)
        const recent = yield* snapshotAll(db, carol)
        yield* run(alice, "Task", "rename", { title: "Launch final" }, t1)
        const before = yield* Effect.orDie(db.reader.unsafe<{ position: number; receipt: string }>(`SELECT position, receipt FROM _cairn_commits ORDER BY position`))
        const receipts = yield* Effect.orDie(db.reader.unsafe<{ receipt: string }>(`SELECT receipt FROM _cairn_receipts ORDER BY position`))
        assert.strictEqual(yield* db.compact, 10)
        assert.strictEqual(yield* Effect.orDie(Log.watermark(db.reader)), 10)
        const after = yield* Effect.orDie(db.reader.unsafe<{ position: number; receipt: string; changes: string }>(`SELECT position, receipt, changes FROM _cairn_commits ORDER BY position`))
        assert.deepStrictEqual(after.map((r) => ({ position: r.position, receipt: r.receipt })), before)
        assert.deepStrictEqual(after.map((r) => r.changes === "[]"), [...Array(10).fill(true), false, false])
        assert.deepStrictEqual(yield* Effect.orDie(db.reader.unsafe(`SELECT receipt FROM _cairn_receipts ORDER BY position`)), receipts)

        const compactedBefore = (yield* Metric.value(Metric.tagged(SyncMetrics.resnapshots, "reason", "history_compacted"))).count
        assert.deepStrictEqual(kinds(yield* changesOnce(db, carol, old.checkpoint.cursor)), ["Resnapshot history_compacted"])
        assert.strictEqual((yield* Metric.value(Metric.tagged(SyncMetrics.resnapshots, "reason", "history_compacted"))).count, compactedBefore + 1)
        const fresh = yield* changesOnce(db, carol, recent.checkpoint.cursor)
        assert.deepStrictEqual(kinds(fresh), [`Upsert Task/${t1}`])
      }),
      { retainedCommits: 2 }
    ))

  it.scoped("many live streams of a few kinds share replayed ranges, yet each sees exactly its own view", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, t2 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        // Three streams for each of three kinds (alice, carol, bob): equal views share ranges, others must not.
        const streams = yield* liveUntil(sync, db, [alice, alice, alice, carol, carol, carol, bob, bob, bob], everything, 10)
        yield* run(bob, "Task", "rename", { title: "Hidden" }, t2)
        yield* run(alice, "Task", "rename", { title: "Seen" }, t1)
        yield* run(alice, "Task", "complete", {}, t1)
        yield* run(bob, "Task", "create", { projectId: (yield* visibleTo(db, bob)).get(`Task/${t2}`)!["projectId"] as string, title: "Bob's" })
        for (const { caller, received, snap } of streams) {
          const messages = yield* received
          // The oracle: what a fresh authorized read shows this caller now.
          assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller))
          if (caller.subject === "bob") assert.deepStrictEqual(kinds(messages).filter((k) => k.includes(t1)), [])
          else assert.deepStrictEqual(kinds(messages).filter((k) => k.includes(t2)), [])
        }
      })
    ))

  it.scoped("live task streams of subjects with different memberships each get exactly theirs from the same commits (decided without the generator)", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, t2 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        // Task edits touch no row the Task policy reads through (memberships, projects): the direct path.
        const streams = yield* liveUntil(sync, db, [alice, carol, bob, alice, carol, bob], tasksOnly, 9)
        yield* run(alice, "Task", "rename", { title: "Seen" }, t1)
        yield* run(bob, "Task", "rename", { title: "Hidden" }, t2)
        yield* run(alice, "Task", "complete", {}, t1)
        for (const { caller, received, snap } of streams) {
          const messages = yield* received
          assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller, tasksOnly))
          const seen = kinds(messages)
          if (caller.subject === "bob") {
            assert.deepStrictEqual(seen.filter((k) => k.includes(t1)), [])
            assert.includeMembers(seen, [`Upsert Task/${t2}`])
          } else {
            assert.deepStrictEqual(seen.filter((k) => k.includes(t2)), [])
            assert.includeMembers(seen, [`Upsert Task/${t1}`])
          }
        }
      })
    ))

  it.scopedLive("streams the hub writes to directly (a transport's sink), of different subjects and positions, each get exactly their view and their own cursors", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, t2 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        // The engine's sealer (its secret): cursors open only with it.
        const sealer = yield* Effect.provide(Sealer, Sealer.layer(secret))
        /** A live stream whose batches after its first reach `texts` through a sink, as a transport's would. */
        const open = (caller: Principal) =>
          Effect.gen(function* () {
            const snap = yield* snapshotAll(db, caller, tasksOnly)
            const texts: Array<string> = []
            const sink = { offer: (text: string) => (texts.push(text), true) }
            const streamed: Array<SyncMessage> = []
            yield* sync.changes(caller, yield* viewOf(caller), db, { scope: tasksOnly, cursor: snap.checkpoint.cursor }).pipe(
              Stream.runForEach((m) => Effect.sync(() => streamed.push(m))),
              Effect.provideService(SyncLiveSink, sink),
              Effect.forkScoped
            )
            // Every message the client got: what the stream sent, then what the hub wrote.
            const messages = () => [...streamed, ...texts.map((t) => Schema.decodeUnknownSync(SyncMessage)(JSON.parse(t)))]
            return { caller, snap, messages, texts }
          })
        const reached = (client: { readonly messages: () => ReadonlyArray<SyncMessage> }, position: number) =>
          client.messages().some((m) => m._tag === "SyncBatch" && m.checkpoint.position === Position.encode(position))
        const awaitAll = (clients: ReadonlyArray<{ readonly messages: () => ReadonlyArray<SyncMessage> }>, position: number) =>
          Effect.repeat(Effect.sleep("5 millis"), { until: () => clients.every((c) => reached(c, position)) })
        // Two of each subject at position 6, then one of each joins one commit later (a second position in one round).
        const early = yield* Effect.forEach([alice, carol, bob, alice, carol, bob], open)
        yield* awaitAll(early, 6)
        yield* run(alice, "Task", "rename", { title: "Seen" }, t1)
        const late = yield* Effect.forEach([alice, carol, bob], open)
        yield* run(bob, "Task", "rename", { title: "Hidden" }, t2)
        yield* run(alice, "Task", "complete", {}, t1)
        const clients = [...early, ...late]
        yield* awaitAll(clients, 9)
        for (const { caller, snap, messages, texts } of clients) {
          assert.isAbove(texts.length, 0)
          for (const m of messages()) {
            assert.strictEqual(m._tag, "SyncBatch")
            if (m._tag !== "SyncBatch") continue
            assert.strictEqual(m.checkpoint.subject, caller.subject)
            // A cursor written by the hub opens for this caller's binding, at its position.
            const cursor = SyncCursor.openCursor(sealer, m.checkpoint.cursor)
            assert.strictEqual(cursor?.subject, caller.subject)
            assert.strictEqual(cursor !== undefined ? Position.encode(cursor.position) : undefined, m.checkpoint.position)
            applyBatch(snap.records, m)
          }
          assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller, tasksOnly))
          const seen = kinds(messages())
          assert.deepStrictEqual(seen.filter((k) => k.includes(caller.subject === "bob" ? t1 : t2)), [])
        }
      })
    ))

  it.scoped("live streams of one policy template but different memberships get different change lists from one commit, and a membership change in the range is decided per subject", () =>
    withEngine(
      Effect.gen(function* () {
        const { p2, t1, t2 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const dave = who("dave")
        // alice owns P1, carol views it, bob owns P2, dave is a member of nothing (yet): one template, four views.
        const streams = yield* Effect.forEach([alice, carol, bob, dave], (caller) =>
          Effect.gen(function* () {
            const snap = yield* snapshotAll(db, caller, tasksOnly)
            const received: Array<SyncMessage> = []
            const fiber = yield* sync.changes(caller, yield* viewOf(caller), db, { scope: tasksOnly, cursor: snap.checkpoint.cursor }).pipe(
              Stream.takeUntil((m) => m._tag !== "SyncBatch" || m.checkpoint.position === Position.encode(9)),
              Stream.runForEach((m) => Effect.sync(() => received.push(m))),
              Effect.fork
            )
            return { caller, snap, fiber, received }
          })
        )
        // Every stream caught up (its first batch, read by itself): the commits below reach them through the hub.
        yield* Effect.repeat(Effect.yieldNow(), { until: () => streams.every((s) => s.received.length > 0) })
        yield* run(alice, "Task", "rename", { title: "Seen by P1" }, t1)
        yield* run(erin, "Member", "add", { projectId: p2, subject: "dave", role: "viewer", email: "dave@example.com" })
        yield* run(bob, "Task", "rename", { title: "Seen by P2" }, t2)
        const got = new Map<string, ReadonlyArray<string>>()
        for (const { caller, snap, fiber, received: messages } of streams) {
          yield* Fiber.join(fiber)
          got.set(caller.subject, kinds(messages))
          if (caller !== dave) {
            for (const m of messages) applyBatch(snap.records, m)
            assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller, tasksOnly))
          }
        }
        assert.deepStrictEqual(got.get("alice"), [`Upsert Task/${t1}`])
        assert.deepStrictEqual(got.get("carol"), [`Upsert Task/${t1}`])
        assert.deepStrictEqual(got.get("bob"), [`Upsert Task/${t2}`])
        // dave's own membership makes an untouched task visible: he starts again, whichever batches the hub made.
        assert.deepStrictEqual(got.get("dave"), ["Resnapshot access_changed"])
      })
    ))

  it.scoped("a task moved between projects leaves one member's stream and enters the other's; a rename in between reaches only its project's members", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, p2, t1 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        // A move changes the field the Task policy reads (decided twice); a rename does not (decided once).
        const streams = yield* liveUntil(sync, db, [alice, bob, alice, bob], tasksOnly, 9)
        yield* run(erin, "Task", "move", { projectId: p2 }, t1)
        yield* run(erin, "Task", "rename", { title: "Elsewhere" }, t1)
        yield* run(erin, "Task", "move", { projectId: p1 }, t1)
        for (const { caller, received, snap } of streams) {
          const messages = yield* received
          assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller, tasksOnly))
          // Never a row of a project the caller is not a member of, whichever commits a batch spans.
          const foreign = caller.subject === "bob" ? p1 : p2
          const upserts = messages.flatMap((m) => (m._tag === "SyncBatch" ? m.changes : [])).filter((c) => c._tag === "Upsert")
          assert.deepStrictEqual(upserts.filter((c) => c._tag === "Upsert" && c.record["projectId"] === foreign), [])
        }
      })
    ))

  it.scoped("streams that see different fields of one changed record each get exactly their fields, though they share its change", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const members: SyncScope = { entities: [{ from: { kind: "entity", name: "Member" } }] }
        // erin (admin) sees members' email, alice and carol do not: the hub's streams replay one commit list.
        const streams = yield* liveUntil(sync, db, [erin, alice, carol, erin, alice], members, 7)
        const dave = idOf(yield* run(alice, "Member", "add", { projectId: p1, subject: "dave", role: "viewer", email: "dave@example.com" }))
        const records: Array<Record<string, unknown>> = []
        for (const { caller, received, snap } of streams) {
          const messages = yield* received
          assert.deepStrictEqual(snap.records, yield* visibleTo(db, caller, members))
          const upsert = messages.flatMap((m) => (m._tag === "SyncBatch" ? m.changes : [])).find((c) => c.id === dave)
          assert.strictEqual(upsert?._tag, "Upsert")
          if (upsert?._tag === "Upsert") {
            assert.strictEqual(upsert.record["email"], caller.subject === "erin" ? "dave@example.com" : undefined)
            records.push(upsert.record)
          }
        }
        assert.strictEqual(records.length, 5)
      })
    ))

  it.scoped("a database's hub (and the caches it holds) lives exactly while some changes stream of the database runs", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1 } = yield* seed
        const db = yield* database()
        const sync = yield* Sync
        const view = yield* viewOf(carol)
        const snap = yield* snapshotAll(db, carol)
        const until = (position: number) =>
          sync.changes(carol, view, db, { scope: everything, cursor: snap.checkpoint.cursor }).pipe(
            Stream.takeUntil((m) => m._tag === "SyncBatch" && m.checkpoint.position === Position.encode(position)),
            Stream.runCollect,
            Effect.map(Chunk.toReadonlyArray),
            Effect.fork
          )
        // Snapshots hold no hub; a live stream takes one, a second stream of the database shares it.
        assert.deepStrictEqual(yield* sync.openHubs, [])
        const first = yield* until(7)
        const second = yield* until(8)
        yield* Effect.yieldNow()
        yield* run(alice, "Task", "rename", { title: "One" }, t1)
        yield* Fiber.join(first)
        assert.deepStrictEqual(yield* sync.openHubs, [db.id])
        yield* run(alice, "Task", "rename", { title: "Two" }, t1)
        const seen = kinds(yield* Fiber.join(second))
        assert.isNotEmpty(seen)
        for (const k of seen) assert.strictEqual(k, `Upsert Task/${t1}`)
        // The last stream ended: its RcMap entry closed, and with it the hub, its fibers and its caches.
        assert.deepStrictEqual(yield* sync.openHubs, [])
        // A non-live resume leaves no hub behind either; a later stream is served by a fresh one.
        assert.deepStrictEqual(kinds(yield* changesOnce(db, carol, snap.checkpoint.cursor)), [`Upsert Task/${t1}`])
        assert.deepStrictEqual(yield* sync.openHubs, [])
        const third = yield* until(9)
        yield* run(alice, "Task", "rename", { title: "Three" }, t1)
        const messages = yield* Fiber.join(third)
        for (const m of messages) applyBatch(snap.records, m)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))
        assert.deepStrictEqual(yield* sync.openHubs, [])
      })
    ))

  it.scoped("a live stream delivers each commit as it happens until the caller stops", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, t2 } = yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, carol)
        const sync = yield* Sync
        const view = yield* viewOf(carol)
        const lagBefore = (yield* Metric.value(SyncMetrics.lagMillis)).count
        const fiber = yield* sync.changes(carol, view, db, { scope: everything, cursor: snap.checkpoint.cursor }).pipe(
          Stream.takeUntil((m) => m._tag === "SyncBatch" && m.checkpoint.position === Position.encode(9)),
          Stream.runCollect,
          Effect.fork
        )
        yield* run(bob, "Task", "rename", { title: "Hidden" }, t2)
        yield* run(alice, "Task", "rename", { title: "Seen" }, t1)
        yield* run(alice, "Task", "complete", {}, t1)
        const messages = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
        assert.strictEqual(messages[0]!._tag, "SyncBatch")
        const all = kinds(messages)
        assert.deepStrictEqual(all.filter((k) => k.includes(t2)), [])
        assert.includeMembers(all, [`Upsert Task/${t1}`])
        for (const m of messages) applyBatch(snap.records, m)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))
        assert.isAbove((yield* Metric.value(SyncMetrics.lagMillis)).count, lagBefore)
      })
    ))
})

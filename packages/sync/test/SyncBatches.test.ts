// Catch-up in bounded batches: a stream behind by more than `maxBatchBytes` of stored changes
// is sent several batches, each ending at its last commit's checkpoint, each within the bound
// (a larger commit alone), until it reaches the tip; only then does a live stream wait for
// commits, and a `live: false` one ends there.
import { assert, describe, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Effect, Exit, Stream } from "effect"
import type { SyncBatch, SyncMessage } from "@cairn/domain/Sync"
import type { Database } from "@cairn/store/Databases"
import { Log, Position } from "@cairn/store"
import { Sync } from "@cairn/sync/Sync"
import { syncConfig } from "@cairn/sync/SyncConfig"
import { applyBatch, changesOnce, engineLayer, snapshotAll } from "./support/harness.js"
import { database, everything, idOf, run, tempDir, viewOf, visibleTo, who } from "./support/tracker.js"

const alice = who("alice")
const carol = who("carol")
/** An admin sees every row by its own fields: its scope's policy reads no other rows, so its catch-up splits. */
const admin = who("erin", { roles: ["admin"] })

const BOUND = 2048

const withEngine = <A, E, R>(effect: Effect.Effect<A, E, R>, options: Parameters<typeof engineLayer>[1] = {}) =>
  Effect.flatMap(tempDir, (dir) => Effect.provide(effect, engineLayer(dir, { maxBatchBytes: BOUND, ...options })))

/** P1 (alice owner, carol viewer) with a task. */
const seed = Effect.gen(function* () {
  const p1 = idOf(yield* run(alice, "Project", "create", { name: "Apollo" }))
  yield* run(alice, "Member", "add", { projectId: p1, subject: "carol", role: "viewer", email: "carol@example.com" })
  const t1 = idOf(yield* run(alice, "Task", "create", { projectId: p1, title: "Launch" }))
  return { p1, t1 }
})

/** Many small commits, one much larger than the bound, and more small ones. */
const history = (p1: string, t1: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 30; i++) yield* run(alice, "Task", "rename", { title: `rename ${i}` }, t1)
    yield* run(alice, "Task", "createMany", { projectId: p1, count: 40, prefix: "bulk" })
    for (let i = 0; i < 10; i++) yield* run(alice, "Task", "create", { projectId: p1, title: `late ${i}` })
  })

/** `reader`'s snapshot after the seed, then the history committed: where its stream starts, and the tip. */
const behind = (reader = admin) =>
  Effect.gen(function* () {
    const { p1, t1 } = yield* seed
    const db = yield* database()
    const snap = yield* snapshotAll(db, reader)
    const from = Position.decode(snap.checkpoint.position)!
    yield* history(p1, t1)
    const tip = yield* Effect.orDie(Log.lastPosition(db.reader))
    return { t1, db, snap, from, tip }
  })

/** Stored bytes of the commits' changes after `after` up to `through`. */
const storedBytes = (db: Database, after: number, through: number) =>
  Effect.map(
    Effect.orDie(db.reader.unsafe<{ readonly b: number }>(`SELECT coalesce(sum(octet_length(changes)), 0) AS b FROM ${Log.commitsTable} WHERE position > ? AND position <= ?`, [after, through])),
    (rows) => Number(rows[0]!.b)
  )

const positionOf = (message: SyncMessage) => {
  assert.strictEqual(message._tag, "SyncBatch")
  return Position.decode((message as SyncBatch).checkpoint.position)!
}

/** Every batch after `from` covers the commits up to its checkpoint: within `bound`, or a single commit. */
const assertBounded = (db: Database, from: number, messages: ReadonlyArray<SyncMessage>, bound = BOUND) =>
  Effect.gen(function* () {
    let at = from
    let lone = 0
    for (const m of messages) {
      const end = positionOf(m)
      assert.isAbove(end, at, "every batch moves on")
      const bytes = yield* storedBytes(db, at, end)
      if (bytes > bound) {
        assert.strictEqual(end - at, 1, `a batch over the bound (${bytes} bytes) holds one commit`)
        lone += 1
      }
      at = end
    }
    return { end: at, lone }
  })

describe("catch-up in bounded batches", () => {
  it.scoped("a cursor far behind gets several batches within the bound, the large commit alone, ending at the tip", () =>
    withEngine(
      Effect.gen(function* () {
        const { db, snap, from, tip } = yield* behind()
        const messages = yield* changesOnce(db, admin, snap.checkpoint.cursor)
        assert.isAbove(messages.length, 4)
        const { end, lone } = yield* assertBounded(db, from, messages)
        assert.strictEqual(end, tip)
        assert.strictEqual(lone, 1, "the createMany commit exceeds the bound and goes alone")
        for (const m of messages) applyBatch(snap.records, m)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, admin))
        assert.deepStrictEqual(snap.records, (yield* snapshotAll(db, admin)).records)
      })
    ))

  it.scoped("resuming from any intermediate checkpoint gets exactly the rest", () =>
    withEngine(
      Effect.gen(function* () {
        const { db, snap } = yield* behind()
        const messages = yield* changesOnce(db, admin, snap.checkpoint.cursor)
        assert.isAbove(messages.length, 2)
        const shape = (ms: ReadonlyArray<SyncMessage>) => ms.map((m) => ({ position: positionOf(m), changes: (m as SyncBatch).changes }))
        for (let k = 0; k < messages.length - 1; k++) {
          const rest = yield* changesOnce(db, admin, (messages[k] as SyncBatch).checkpoint.cursor)
          assert.deepStrictEqual(shape(rest), shape(messages.slice(k + 1)))
        }
      })
    ))

  it.scoped("a live: false request ends at the tip as of the request, in bounded batches", () =>
    withEngine(
      Effect.gen(function* () {
        const { t1, db, snap, from, tip } = yield* behind()
        const sync = yield* Sync
        const view = yield* viewOf(admin)
        let wrote = false
        // A commit lands while the stream is between its batches: it is for the next request.
        const messages = Chunk.toReadonlyArray(
          yield* sync.changes(admin, view, db, { scope: everything, cursor: snap.checkpoint.cursor, live: false }).pipe(
            Stream.tap(() =>
              wrote ? Effect.void : Effect.zipRight(run(alice, "Task", "rename", { title: "after the request" }, t1), Effect.sync(() => (wrote = true)))
            ),
            Stream.runCollect
          )
        )
        assert.isTrue(wrote)
        assert.isAbove(messages.length, 2)
        const { end } = yield* assertBounded(db, from, messages)
        assert.strictEqual(end, tip)
        for (const m of messages) applyBatch(snap.records, m)
        const last = messages[messages.length - 1] as SyncBatch
        const rest = yield* changesOnce(db, admin, last.checkpoint.cursor)
        assert.strictEqual(rest.length, 1)
        assert.strictEqual(positionOf(rest[0]!), tip + 1)
        applyBatch(snap.records, rest[0]!)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, admin))
      })
    ))

  it.scoped("a live stream that fell far behind is sent bounded batches up to the tip, then follows live", () =>
    withEngine(
      Effect.gen(function* () {
        const { p1, t1 } = yield* seed
        const db = yield* database()
        const snap = yield* snapshotAll(db, admin)
        const from = Position.decode(snap.checkpoint.position)!
        const sync = yield* Sync
        const view = yield* viewOf(admin)
        const pull = yield* Stream.toPull(sync.changes(admin, view, db, { scope: everything, cursor: snap.checkpoint.cursor }))
        const next = Effect.map(Effect.orDie(pull), (chunk) => Chunk.toReadonlyArray(chunk))
        const received: Array<SyncMessage> = []
        const until = (position: number) =>
          Effect.gen(function* () {
            while (received.length === 0 || positionOf(received[received.length - 1]!) < position) received.push(...(yield* next))
          })
        // At the tip: the stream is live, waiting in the hub.
        yield* until(from)
        // The reader stops taking messages while the whole history is committed, then takes them again.
        yield* run(alice, "Task", "rename", { title: "while live" }, t1)
        yield* history(p1, t1)
        const tip = yield* Effect.orDie(Log.lastPosition(db.reader))
        yield* until(tip)
        const { end, lone } = yield* assertBounded(db, from, received.slice(1))
        assert.strictEqual(end, tip)
        assert.strictEqual(lone, 1)
        assert.isAbove(received.length, 5)
        // Back at the tip, it follows the next commit live.
        yield* run(alice, "Task", "rename", { title: "live again" }, t1)
        yield* until(tip + 1)
        for (const m of received) applyBatch(snap.records, m)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, admin))
      })
    ))

  it.scoped("a scope whose policy reads other rows catches up in one batch, decided at its end, when it fits one batch", () =>
    withEngine(
      Effect.gen(function* () {
        const { db, snap, tip } = yield* behind(carol)
        const messages = yield* changesOnce(db, carol, snap.checkpoint.cursor)
        assert.strictEqual(messages.length, 1)
        assert.strictEqual(positionOf(messages[0]!), tip)
        applyBatch(snap.records, messages[0]!)
        assert.deepStrictEqual(snap.records, yield* visibleTo(db, carol))
      }),
      { maxBatchBytes: 1024 * 1024 }
    ))

  it.scoped("a scope whose policy reads other rows, further behind than one batch (bytes or commits), is sent a resnapshot", () =>
    Effect.gen(function* () {
      for (const bounds of [{}, { maxBatchBytes: 1024 * 1024, maxBatchCommits: 20 }]) {
        yield* withEngine(
          Effect.gen(function* () {
            const { db, snap } = yield* behind(carol)
            const messages = yield* changesOnce(db, carol, snap.checkpoint.cursor)
            assert.strictEqual(messages.length, 1)
            assert.deepInclude(messages[0], { _tag: "Resnapshot", reason: "too_far_behind" })
          }),
          bounds
        )
      }
    }))

  it.scoped("a cursor whose history was compacted away mid catch-up gets a resnapshot", () =>
    withEngine(
      Effect.gen(function* () {
        const { db, snap } = yield* behind()
        const messages = yield* changesOnce(db, admin, snap.checkpoint.cursor)
        const first = messages[0] as SyncBatch
        yield* db.compact
        const watermark = yield* Effect.orDie(Log.watermark(db.reader))
        assert.isAbove(watermark, positionOf(first))
        const again = yield* changesOnce(db, admin, first.checkpoint.cursor)
        assert.strictEqual(again.length, 1)
        assert.deepInclude(again[0], { _tag: "Resnapshot", reason: "history_compacted" })
      }),
      { retainedCommits: 1 }
    ))

  it.effect("CAIRN_SYNC_MAX_BATCH_BYTES: 1 MiB unless set, a positive integer", () =>
    Effect.gen(function* () {
      const read = (env: Record<string, string>) => Effect.exit(Effect.withConfigProvider(syncConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))
      const unset = yield* read({})
      assert.isTrue(Exit.isSuccess(unset) && unset.value.maxBatchBytes === 1024 * 1024)
      const set = yield* read({ CAIRN_SYNC_MAX_BATCH_BYTES: "4096" })
      assert.isTrue(Exit.isSuccess(set) && set.value.maxBatchBytes === 4096)
      for (const bad of ["0", "-1", "1.5", "lots"]) assert.isTrue(Exit.isFailure(yield* read({ CAIRN_SYNC_MAX_BATCH_BYTES: bad })), bad)
    }))
})

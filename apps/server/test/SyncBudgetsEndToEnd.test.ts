// Sync within the work budgets, through the real server: a snapshot page examines at most the
// queries' rows-examined budget (a scope few rows match is served in short, even empty, pages
// that still complete), a catch-up batch replays a bounded number of commits under every policy
// shape (a policy that reads other rows is sent a resnapshot when it is further behind than one
// batch), and a forged cursor or continuation answers exactly as another principal's genuine one.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { tracker } from "@cairn/client/generated/tracker"
import type { SnapshotPage, SyncBatch, SyncMessage, SyncScope } from "@cairn/domain/Sync"
import { Position } from "@cairn/store"
import { Effect, Option } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"

const erin: Who = { sub: "erin", org: "acme", roles: ["admin"] }
const alice: Who = { sub: "alice", org: "acme" }
const bob: Who = { sub: "bob", org: "acme" }

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }
const needles: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["title"], value: "needle" } }] }

interface Answer {
  readonly status: number
  readonly text: string
  readonly values: ReadonlyArray<unknown>
  readonly exit: { readonly _tag: string; readonly cause?: unknown } | undefined
}

/** One sync RPC on `/db/sync`, read to its end. */
const call = (app: Running, token: string, tag: "SyncSnapshot" | "SyncChanges", payload: unknown) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(`${app.base}/db/sync`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
      body: `${JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })}\n`
    })
    const text = await response.text()
    const values: Array<unknown> = []
    let exit: Answer["exit"]
    if (response.status === 200) {
      for (const line of text.split("\n")) {
        if (line === "") continue
        const message = JSON.parse(line)
        if (message._tag === "Chunk") values.push(...message.values)
        if (message._tag === "Exit") {
          exit = message.exit
          if (message.exit._tag === "Success" && message.exit.value !== undefined) values.push(message.exit.value)
        }
      }
    }
    return { status: response.status, text, values, exit }
  })

const page = (answer: Answer) => {
  assert.strictEqual(answer.exit?._tag, "Success", answer.text)
  return answer.values[answer.values.length - 1] as SnapshotPage
}

/** Every page of a snapshot of `scope`. */
const snapshotPages = (app: Running, token: string, scope: SyncScope) =>
  Effect.gen(function* () {
    const pages: Array<SnapshotPage> = []
    let after: string | undefined
    for (;;) {
      const p = page(yield* call(app, token, "SyncSnapshot", { scope, ...(after !== undefined ? { after } : {}) }))
      pages.push(p)
      if (p.checkpoint !== undefined) return pages
      assert.isDefined(p.next, "a page that is not the last continues")
      after = p.next
    }
  })

const changes = (app: Running, token: string, scope: SyncScope, cursor: string) =>
  Effect.map(call(app, token, "SyncChanges", { scope, cursor, live: false }), (a) => {
    assert.strictEqual(a.exit?._tag, "Success", a.text)
    return a.values as ReadonlyArray<SyncMessage>
  })

const localFile = (name: string) => join(mkdtempSync(join(tmpdir(), "cairn-sync-budgets-")), `${name}.sqlite`)

describe("sync within budgets through the real server", () => {
  it.scopedLive("a snapshot under a scope on an unindexed field examines at most the work budget per page, and completes", () =>
    Effect.gen(function* () {
      const budget = 20
      const app = yield* startApp({
        env: { CAIRN_QUERY_MAX_PAGE_SIZE: "10", CAIRN_QUERY_DEFAULT_PAGE_SIZE: "10", CAIRN_QUERY_MAX_ROWS_EXAMINED: String(budget) }
      })
      const token = yield* app.token(erin)
      const as = app.as(token)
      const project = (yield* as(tracker.Project.create({ input: { name: "Haystack" } }))).output.id
      const total = 130
      const created = yield* Effect.forEach(
        Array.from({ length: total }, (_, i) => i),
        (i) => Effect.map(as(tracker.Task.create({ input: { projectId: project, title: i % 37 === 5 ? "needle" : `hay ${i}` } })), (r) => ({ i, id: r.output.id })),
        { concurrency: 8 }
      )
      const expected = created.filter(({ i }) => i % 37 === 5).map((t) => t.id).sort()

      const pages = yield* snapshotPages(app, token, needles)
      // Each page examined at most `budget` rows of Task: 130 rows need at least 7 pages, most of them short or empty.
      assert.isAtLeast(pages.length, Math.ceil(total / budget))
      assert.isTrue(pages.some((p) => p.records.length === 0 && p.next !== undefined), "an empty page that is not the last is legal")
      const got = pages.flatMap((p) => p.records.map((r) => r.id)).sort()
      assert.deepStrictEqual(got, expected, "the pages together hold exactly the scope")

      // The whole-table scope under the same budget: every row, none twice.
      const all = (yield* snapshotPages(app, token, tasks)).flatMap((p) => p.records.map((r) => r.id))
      assert.strictEqual(new Set(all).size, total)
      assert.strictEqual(all.length, total)

      // The Node client completes the same snapshot, page after page, and then follows changes.
      const synced = yield* Effect.scoped(
        Effect.gen(function* () {
          const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
          const c = yield* SyncClient.make({ file: localFile("needles"), scope: needles, rpc })
          yield* c.syncOnce
          yield* as(tracker.Task.create({ input: { projectId: project, title: "needle" } }))
          yield* c.syncOnce
          return yield* c.store.dump
        })
      )
      assert.strictEqual(synced.size, expected.length + 1)
      for (const id of expected) assert.isTrue(synced.has(`Task/${id}`))
    })
  )

  it.scopedLive("catch-up batches replay at most the commit bound; a cross-row policy further behind is sent a resnapshot", () =>
    Effect.gen(function* () {
      const bound = 10
      const app = yield* startApp({ env: { CAIRN_SYNC_MAX_BATCH_COMMITS: String(bound) } })
      const erinToken = yield* app.token(erin)
      const aliceToken = yield* app.token(alice)
      const project = (yield* app.as(aliceToken)(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* app.as(aliceToken)(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id

      const erinStart = (yield* snapshotPages(app, erinToken, tasks)).at(-1)!.checkpoint!
      const aliceStart = (yield* snapshotPages(app, aliceToken, tasks)).at(-1)!.checkpoint!

      // Within one batch, a cross-row policy catches up as before.
      for (let i = 0; i < bound - 2; i++) yield* app.as(aliceToken)(tracker.Task.rename({ target: task, input: { title: `near ${i}` } }))
      const near = yield* changes(app, aliceToken, tasks, aliceStart.cursor)
      assert.deepStrictEqual(near.map((m) => m._tag), ["SyncBatch"])
      const nearCheckpoint = (near[0] as SyncBatch).checkpoint

      for (let i = 0; i < 4 * bound; i++) yield* app.as(aliceToken)(tracker.Task.rename({ target: task, input: { title: `far ${i}` } }))

      // An own-row policy (the admin's) is cut into batches of at most `bound` commits.
      const erinMessages = yield* changes(app, erinToken, tasks, erinStart.cursor)
      let at = Position.decode(erinStart.position)!
      for (const m of erinMessages) {
        assert.strictEqual(m._tag, "SyncBatch")
        const end = Position.decode((m as SyncBatch).checkpoint.position)!
        assert.isAtMost(end - at, bound, "no batch replays more than the commit bound")
        at = end
      }
      assert.isAtLeast(erinMessages.length, 4)

      // A policy that reads other rows (membership) cannot be cut: further behind than one batch, it resnapshots.
      const far = yield* changes(app, aliceToken, tasks, nearCheckpoint.cursor)
      assert.deepStrictEqual(far, [{ _tag: "Resnapshot", reason: "too_far_behind", message: far[0]!._tag === "Resnapshot" ? far[0]!.message : "" }])
      assert.match((far[0] as { message: string }).message, /take a new snapshot/)

      // The client follows that path and ends with what a fresh snapshot holds.
      const file = localFile("alice")
      const client = (token: string) =>
        Effect.flatMap(SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) }), (rpc) => SyncClient.make({ file, scope: tasks, rpc }))
      yield* Effect.scoped(Effect.flatMap(client(aliceToken), (c) => c.syncOnce))
      for (let i = 0; i < 2 * bound; i++) yield* app.as(aliceToken)(tracker.Task.rename({ target: task, input: { title: `later ${i}` } }))
      const back = yield* Effect.scoped(
        Effect.gen(function* () {
          const c = yield* client(aliceToken)
          yield* c.syncOnce
          return { records: yield* c.store.dump, status: yield* c.status.get }
        })
      )
      assert.strictEqual(back.status.resnapshots, 1)
      const freshPages = yield* snapshotPages(app, aliceToken, tasks)
      const fresh = freshPages.flatMap((p) => p.records)
      assert.deepStrictEqual(back.records, new Map(fresh.map((r) => [`Task/${r.id}`, r.record])))
      assert.strictEqual(Option.getOrThrow(back.status.checkpoint).position, freshPages.at(-1)!.checkpoint!.position)
    })
  )

  it.scopedLive("a forged cursor and another principal's genuine cursor get the same public answer", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_SYNC_PAGE_ROWS: "2" } })
      const aliceToken = yield* app.token(alice)
      const bobToken = yield* app.token(bob)
      for (const token of [aliceToken, bobToken]) {
        const project = (yield* app.as(token)(tracker.Project.create({ input: { name: "Own" } }))).output.id
        for (let i = 0; i < 5; i++) yield* app.as(token)(tracker.Task.create({ input: { projectId: project, title: `t${i}` } }))
      }
      const bobFirst = page(yield* call(app, bobToken, "SyncSnapshot", { scope: tasks }))
      assert.isDefined(bobFirst.next)
      const bobCheckpoint = (yield* snapshotPages(app, bobToken, tasks)).at(-1)!.checkpoint!

      // A cursor and a continuation alice could make up: random text, and bob's with its last character changed.
      const tamper = (s: string) => s.slice(0, -1) + (s.endsWith("A") ? "B" : "A")
      const forgedContinuations = ["not-a-continuation", tamper(bobFirst.next!)]
      const forgedCursors = ["not-a-cursor", tamper(bobCheckpoint.cursor)]

      const continuationAnswer = (after: string) =>
        Effect.map(call(app, aliceToken, "SyncSnapshot", { scope: tasks, after }), (a) => ({ status: a.status, text: a.text }))
      const genuine = yield* continuationAnswer(bobFirst.next!)
      assert.match(genuine.text, /InvalidQuery/)
      for (const forged of forgedContinuations) assert.deepStrictEqual(yield* continuationAnswer(forged), genuine)

      const cursorAnswer = (cursor: string) => changes(app, aliceToken, tasks, cursor)
      const foreign = yield* cursorAnswer(bobCheckpoint.cursor)
      assert.deepStrictEqual(foreign.map((m) => m._tag), ["Resnapshot"])
      for (const forged of forgedCursors) assert.deepStrictEqual(yield* cursorAnswer(forged), foreign)
      // Bob's own cursor still resumes: the answer above is about the caller, not the cursor's state.
      assert.deepStrictEqual((yield* changes(app, bobToken, tasks, bobCheckpoint.cursor)).map((m) => m._tag), ["SyncBatch"])
    })
  )
})

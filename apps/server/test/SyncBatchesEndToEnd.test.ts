// Catch-up in bounded batches through the real server (`CAIRN_SYNC_MAX_BATCH_BYTES`): a
// reader far behind gets several `/db/sync` batches, each with its checkpoint, the one large
// commit alone; resuming from any of those checkpoints gets exactly the rest; the Node
// `SyncClient`, resuming from its file or following live, ends with what a fresh snapshot holds.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { tracker } from "@cairn/client/generated/tracker"
import type { SyncBatch, SyncMessage, SyncScope } from "@cairn/domain/Sync"
import { Position } from "@cairn/store"
import { Effect, Option, Stream } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"

const everything: SyncScope = {
  entities: ["Project", "Member", "Task", "Comment", "Label"].map((name) => ({ from: { kind: "entity" as const, name } }))
}
/** An admin's scope reads every row by its own fields, so its catch-up is cut into bounded batches. */
const erin: Who = { sub: "erin", org: "acme", roles: ["admin"] }
const BOUND = 4096

const localFile = (name: string) => join(mkdtempSync(join(tmpdir(), "cairn-sync-batches-")), `${name}.sqlite`)

const client = (app: Running, file: string) =>
  Effect.gen(function* () {
    const token = yield* app.token(erin)
    const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
    return yield* SyncClient.make({ file, scope: everything, rpc })
  })

/** Every message of one `live: false` changes request on `/db/sync`, read to the stream's end. */
const changesOnce = (app: Running, token: string, cursor: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${app.base}/db/sync`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
      body: `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncChanges", payload: { scope: everything, cursor, live: false }, headers: [] })}\n`
    })
    assert.strictEqual(response.status, 200)
    const messages: Array<SyncMessage> = []
    let exit: string | undefined
    for (const line of (await response.text()).split("\n")) {
      if (line === "") continue
      const message = JSON.parse(line)
      if (message._tag === "Chunk") messages.push(...(message.values as ReadonlyArray<SyncMessage>))
      if (message._tag === "Exit") exit = message.exit._tag
    }
    assert.strictEqual(exit, "Success")
    return messages
  })

const batches = (messages: ReadonlyArray<SyncMessage>) =>
  messages.map((m) => {
    assert.strictEqual(m._tag, "SyncBatch")
    return m as SyncBatch
  })

const positionOf = (batch: SyncBatch) => Position.decode(batch.checkpoint.position)!

describe("sync catch-up in bounded batches through the real server", () => {
  it.scopedLive("a reader far behind gets bounded batches, resumes from any of their checkpoints, and converges", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_SYNC_MAX_BATCH_BYTES: String(BOUND) } })
      const token = yield* app.token(erin)
      const as = app.as(token)
      const project = (yield* as(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* as(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id
      // The client snapshots now, then is away while the history below is committed.
      const away = localFile("away")
      yield* Effect.scoped(Effect.flatMap(client(app, away), (c) => c.syncOnce))
      const start = yield* Effect.scoped(
        Effect.flatMap(client(app, away), (c) => Effect.map(c.status.get, (s) => Option.getOrThrow(s.checkpoint)))
      )
      const follower = yield* client(app, localFile("live"))
      yield* follower.syncOnce
      yield* Effect.forkScoped(follower.run)

      for (let i = 0; i < 40; i++) yield* as(tracker.Comment.add({ input: { taskId: task, body: `${i}`.padEnd(500, "x") } }))
      const large = (yield* as(tracker.Comment.add({ input: { taskId: task, body: "L".padEnd(10_000, "x") } }))).output.id
      for (let i = 0; i < 10; i++) yield* as(tracker.Comment.add({ input: { taskId: task, body: `after ${i}`.padEnd(500, "y") } }))

      const oracle = yield* Effect.scoped(
        Effect.gen(function* () {
          const fresh = yield* client(app, localFile("oracle"))
          yield* fresh.syncOnce
          return { records: yield* fresh.store.dump, position: Position.decode(Option.getOrThrow((yield* fresh.status.get).checkpoint).position)! }
        })
      )

      const all = batches(yield* changesOnce(app, token, start.cursor))
      // 51 commits of over 500 bytes each (one of 10 KB) under a 4 KiB bound.
      assert.isAtLeast(all.length, 7)
      assert.strictEqual(positionOf(all[all.length - 1]!), oracle.position)
      const holding = all.filter((b) => b.changes.some((c) => c.id === large))
      assert.strictEqual(holding.length, 1)
      assert.strictEqual(holding[0]!.changes.length, 1, "the commit larger than the bound goes alone")
      for (const b of all) if (b !== holding[0]) assert.isBelow(JSON.stringify(b.changes).length, 2 * BOUND)

      // Any checkpoint resumes to exactly the batches after it.
      const shape = (bs: ReadonlyArray<SyncBatch>) => bs.map((b) => ({ position: b.checkpoint.position, changes: b.changes }))
      for (const k of [0, Math.floor(all.length / 2), all.length - 2]) {
        assert.deepStrictEqual(shape(batches(yield* changesOnce(app, token, all[k]!.checkpoint.cursor))), shape(all.slice(k + 1)))
      }

      // The client that was away resumes from its file in one request, without a resnapshot.
      const back = yield* Effect.scoped(
        Effect.gen(function* () {
          const c = yield* client(app, away)
          yield* c.syncOnce
          return { records: yield* c.store.dump, status: yield* c.status.get }
        })
      )
      assert.strictEqual(back.status.resnapshots, 0)
      assert.strictEqual(Position.decode(Option.getOrThrow(back.status.checkpoint).position), oracle.position)
      assert.deepStrictEqual(back.records, oracle.records)

      // The live follower, whatever it fell behind by meanwhile, reaches the same state.
      yield* follower.live("Comment").pipe(
        Stream.filter((rows) => rows.length === 51),
        Stream.runHead,
        Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => new Error("the live client never caught up") })
      )
      assert.deepStrictEqual(yield* follower.store.dump, oracle.records)
    }))
})

// Sync backpressure end to end (issue #12): the server exactly as `npm start` assembles
// it, live `SyncChanges` streams on real sockets whose readers stop reading, and megabytes
// committed through `/db/rpc` meanwhile. A stalled stream must hold at most its buffer
// bound in the server (measured as the process's heap plus external memory after a full
// GC: the server runs in this process), and when its reader resumes, or reconnects from
// the last checkpoint it received after the server closed it, it must converge to what
// a fresh snapshot of the same principal holds (the oracle).
import { mkdtempSync } from "node:fs"
import { type IncomingMessage, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { tracker } from "@cairn/client/generated/tracker"
import type { SyncMessage, SyncScope } from "@cairn/domain/Sync"
import { Position } from "@cairn/store"
import { Effect, Option, Stream } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"
import { sync } from "@cairn/testkit/Wire"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const MiB = 1024 * 1024
const everything: SyncScope = {
  entities: ["Project", "Member", "Task", "Comment", "Label"].map((name) => ({ from: { kind: "entity" as const, name } }))
}
// An admin's scope reads every row by its own fields, so a stream far behind catches up in bounded
// batches (under a policy that reads other rows it would be sent a `too_far_behind` resnapshot).
const reader: Who = { sub: "erin", org: "acme", roles: ["admin"] }

/** Bytes the server process holds in JS objects and buffers, after a full collection. */
const heldMemory = Effect.sync(() => {
  gc()
  gc()
  const usage = process.memoryUsage()
  return { held: usage.heapUsed + usage.external, rss: usage.rss }
})

type Local = Map<string, Readonly<Record<string, unknown>>>

const apply = (local: Local, message: SyncMessage) => {
  // The server's last word on a stream it ended (`SyncEnd`): nothing to apply.
  if (message._tag === "SyncEnd") return
  assert.strictEqual(message._tag, "SyncBatch")
  if (message._tag !== "SyncBatch") return
  for (const change of message.changes) {
    const key = `${change.entity}/${change.id}`
    if (change._tag === "Upsert") local.set(key, change.record)
    else local.delete(key)
  }
}

const sorted = (local: ReadonlyMap<string, unknown>) => [...local.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))

/**
 * A `SyncChanges` request on a plain socket, its response paused before a byte is read;
 * destroyed with the test's scope (a paused reader would otherwise hold the server open).
 */
const openPaused = (app: Running, token: string, cursor: string, live: boolean) =>
  Effect.acquireRelease(openRequest(app, token, cursor, live), (res) => Effect.sync(() => res.destroy()))

const openRequest = (app: Running, token: string, cursor: string, live: boolean) =>
  Effect.async<IncomingMessage>((resume) => {
    const body = JSON.stringify({ _tag: "Request", id: "1", tag: "SyncChanges", payload: { scope: everything, cursor, live }, headers: [] })
    const req = request(
      `${app.base}/db/sync`,
      { method: "POST", agent: false, headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" } },
      (res) => {
        res.pause()
        resume(Effect.succeed(res))
      }
    )
    req.on("error", (error) => resume(Effect.die(error)))
    req.end(`${body}\n`)
  })

interface Read {
  /** The stream ended (the server closed it), and how: the RPC exit's tag. */
  readonly ended: "Success" | "Failure" | undefined
  readonly lastPosition: number | undefined
  readonly lastCursor: string | undefined
  /** The stream's final `SyncEnd`, if it sent one. */
  readonly end: SyncMessage | undefined
  /** The response ended cleanly (its last byte and the end of its body arrived), not cut. */
  readonly clean: boolean
}

/** Reads a paused response's messages into `local` until `caughtUp` or the end of the stream. */
const readInto = (res: IncomingMessage, local: Local, caughtUp: (position: number) => boolean) =>
  Effect.async<Read>((resume) => {
    let text = ""
    let lastPosition: number | undefined
    let lastCursor: string | undefined
    let ended: Read["ended"]
    let end: SyncMessage | undefined
    let clean = false
    let settled = false
    const settle = () => {
      if (settled) return
      settled = true
      res.destroy()
      resume(Effect.succeed({ ended, lastPosition, lastCursor, end, clean }))
    }
    res.setEncoding("utf8")
    res.on("data", (data: string) => {
      text += data
      let newline: number
      while ((newline = text.indexOf("\n")) >= 0) {
        const line = text.slice(0, newline)
        text = text.slice(newline + 1)
        const message = JSON.parse(line)
        if (message._tag === "Exit") ended = message.exit._tag
        if (message._tag !== "Chunk") continue
        for (const value of message.values as ReadonlyArray<SyncMessage>) {
          apply(local, value)
          if (value._tag === "SyncEnd") end = value
          if (value._tag === "SyncBatch") {
            lastPosition = Position.decode(value.checkpoint.position)
            lastCursor = value.checkpoint.cursor
          }
        }
        if (lastPosition !== undefined && caughtUp(lastPosition)) return settle()
      }
    })
    res.on("end", () => {
      clean = res.complete
      settle()
    })
    res.on("error", settle)
    res.on("close", settle)
    res.resume()
  })

const localFile = (name: string) => join(mkdtempSync(join(tmpdir(), "cairn-sync-bp-")), `${name}.sqlite`)

/** What a fresh snapshot of `everything` holds for the reader now, with its position: the oracle. */
const oracle = (app: Running) =>
  Effect.gen(function* () {
    const token = yield* app.token(reader)
    const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
    const fresh = yield* SyncClient.make({ file: localFile("oracle"), scope: everything, rpc })
    yield* fresh.syncOnce
    const checkpoint = Option.getOrThrow((yield* fresh.status.get).checkpoint)
    return { records: yield* fresh.store.dump, position: Position.decode(checkpoint.position)! }
  }).pipe(Effect.scoped)

/** The reader's project and task, and the snapshot (records and cursor) every stream starts from. */
const seed = (app: Running) =>
  Effect.gen(function* () {
    const token = yield* app.token(reader)
    const as = app.as(token)
    const project = (yield* as(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
    const task = (yield* as(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id
    const answer = yield* sync(app, token, "SyncSnapshot", { scope: everything })
    const page = answer.value as { records: ReadonlyArray<{ entity: string; id: string; record: Record<string, unknown> }>; checkpoint: { cursor: string } }
    const start: Local = new Map(page.records.map((r) => [`${r.entity}/${r.id}`, r.record]))
    return { token, as, task, start, cursor: page.checkpoint.cursor }
  })

/** `count` comments of 10,000 characters on `task` (about `count` × 10 KB of sync data), 8 at a time. */
const comment = (as: ReturnType<Running["as"]>, task: string, count: number) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) => as(tracker.Comment.add({ input: { taskId: task, body: `${i}`.padEnd(10_000, "x") } })),
    { concurrency: 8, discard: true }
  )

describe("sync backpressure through the real server", () => {
  const streams = 10
  const bufferBytes = 1 * MiB
  const comments = 2_000 // ≈ 20 MiB of changes for every stream

  it.scopedLive(
    "paused live streams hold at most their buffer bound while 20 MiB is committed; resumed, each converges to a fresh snapshot",
    () =>
      Effect.gen(function* () {
        const app = yield* startApp({
          env: { CAIRN_SYNC_STREAM_BUFFER_BYTES: String(bufferBytes), CAIRN_SYNC_STREAM_STALL_MS: "600000" }
        })
        const { as, cursor, start, task, token } = yield* seed(app)
        const paused = yield* Effect.forEach(Array.from({ length: streams }), () => openPaused(app, token, cursor, true))
        // A reader that keeps up, live beside them, is not slowed down or cut.
        const live = yield* SyncClient.make({
          file: localFile("live"),
          scope: everything,
          rpc: yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
        })
        yield* live.syncOnce
        yield* Effect.forkScoped(live.run)

        const before = yield* heldMemory
        yield* comment(as, task, comments)
        yield* live.live("Comment").pipe(
          Stream.filter((rows) => rows.length === comments),
          Stream.runHead
        )
        const after = yield* heldMemory
        const growth = after.held - before.held
        // Each stalled stream: its buffer bound, plus the batch that crossed it (a few commits).
        const bound = streams * (bufferBytes + 1 * MiB) + 64 * MiB
        console.info(
          `sync backpressure: ${streams} paused streams, ${((comments * 10_000) / MiB).toFixed(1)} MiB committed, ` +
            `heap+external ${(before.held / MiB).toFixed(0)} -> ${(after.held / MiB).toFixed(0)} MiB (growth ${(growth / MiB).toFixed(1)} MiB, bound ${(bound / MiB).toFixed(0)} MiB), ` +
            `rss ${(before.rss / MiB).toFixed(0)} -> ${(after.rss / MiB).toFixed(0)} MiB`
        )
        assert.isBelow(growth, bound)

        const expected = yield* oracle(app)
        assert.strictEqual([...expected.records.keys()].filter((key) => key.startsWith("Comment/")).length, comments)
        assert.deepStrictEqual(sorted(yield* live.store.dump), sorted(expected.records))
        // One at a time: each resumed stream catches up on everything it missed.
        for (const res of paused) {
          const local: Local = new Map(start)
          const read = yield* readInto(res, local, (position) => position >= expected.position)
          assert.strictEqual(read.ended, undefined, "a stream within its stall time is not closed")
          assert.strictEqual(read.lastPosition, expected.position)
          assert.deepStrictEqual(sorted(local), sorted(expected.records))
        }
      }),
    240_000
  )

  it.scopedLive(
    "a stream that stays behind past its stall time is closed; the last checkpoint its reader received resumes to the oracle",
    () =>
      Effect.gen(function* () {
        const app = yield* startApp({ env: { CAIRN_SYNC_STREAM_BUFFER_BYTES: String(256 * 1024), CAIRN_SYNC_STREAM_STALL_MS: "500" } })
        const { as, cursor, start, task, token } = yield* seed(app)
        const res = yield* openPaused(app, token, cursor, true)
        // 10 MiB: more than the socket buffers of both kernels hold, so the stream stalls on its bound.
        yield* comment(as, task, 1_000)
        const expected = yield* oracle(app)
        // Well past the stall time after the last commit: the server has ended the stream (and,
        // as it was not drained within another stall time, closed the connection).
        yield* Effect.sleep("3 seconds")

        const local: Local = new Map(start)
        const read = yield* readInto(res, local, () => false)
        assert.notStrictEqual(read.lastPosition, expected.position, "the stalled stream was closed behind, not caught up")
        assert.notStrictEqual(read.ended, "Failure")

        // The last checkpoint the reader received still holds (or its first cursor, if none arrived).
        const again = yield* openPaused(app, token, read.lastCursor ?? cursor, false)
        const resumed = yield* readInto(again, local, () => false)
        assert.strictEqual(resumed.ended, "Success")
        assert.strictEqual(resumed.lastPosition, expected.position)
        assert.deepStrictEqual(sorted(local), sorted(expected.records))
      }),
    120_000
  )

  it.scopedLive(
    "a slow reader past its stall time gets a final SyncEnd (slow_reader) frame and a clean close, then resumes from its last checkpoint",
    () =>
      Effect.gen(function* () {
        const stallMs = 1_000
        const app = yield* startApp({ env: { CAIRN_SYNC_STREAM_BUFFER_BYTES: String(256 * 1024), CAIRN_SYNC_STREAM_STALL_MS: String(stallMs) } })
        const { as, cursor, start, task, token } = yield* seed(app)
        // 10 MiB committed before the stream opens: more than the socket buffers of both kernels and
        // the bound hold, so the paused stream fills them at once and stalls.
        yield* comment(as, task, 1_000)
        const expected = yield* oracle(app)
        const res = yield* openPaused(app, token, cursor, true)
        // Past the stall time (the stream ends), within the next one (the reader is slow, not gone).
        yield* Effect.sleep(stallMs * 1.5)

        const local: Local = new Map(start)
        const read = yield* readInto(res, local, () => false)
        assert.deepStrictEqual(read.end, {
          _tag: "SyncEnd",
          reason: "slow_reader",
          message: "This stream waited too long for its reader; resume from your last checkpoint."
        })
        assert.strictEqual(read.ended, "Success", "the RPC exit follows the final frame")
        assert.isTrue(read.clean, "the response ends cleanly, not with a reset")
        assert.isBelow(read.lastPosition ?? 0, expected.position, "the stream ended behind, not caught up")

        const again = yield* openPaused(app, token, read.lastCursor ?? cursor, false)
        const resumed = yield* readInto(again, local, () => false)
        assert.strictEqual(resumed.ended, "Success")
        assert.strictEqual(resumed.lastPosition, expected.position)
        assert.deepStrictEqual(sorted(local), sorted(expected.records))
      }),
    120_000
  )
})

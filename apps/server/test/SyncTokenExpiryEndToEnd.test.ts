// A live sync stream ends with its token, through the real server: at the `exp` of the token
// that opened it the server ends the stream with a final `SyncEnd` (`invalid_token`) frame and
// sends nothing committed after it; the Node client then takes a fresh token from its token
// source and resumes from its durable cursor, without a resnapshot when its view is unchanged,
// through the server's resnapshot when the new token's role changes it.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { tracker } from "@cairn/client/generated/tracker"
import type { SnapshotPage, SyncMessage, SyncScope } from "@cairn/domain/Sync"
import { Effect, Option, Ref, Stream } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }
const alice: Who = { sub: "alice", org: "acme" }

const localFile = (name: string) => join(mkdtempSync(join(tmpdir(), "cairn-sync-expiry-")), `${name}.sqlite`)

/** The `exp` of a token, in epoch milliseconds. */
const expiryOf = (token: string) => (JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")) as { exp: number }).exp * 1000

const snapshot = (app: Running, token: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${app.base}/db/sync`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
      body: `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncSnapshot", payload: { scope: tasks }, headers: [] })}\n`
    })
    const exit = (await response.text()).split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).find((m) => m._tag === "Exit")
    return exit.exit.value as SnapshotPage
  })

interface Live {
  readonly messages: Array<SyncMessage>
  /** Completes with the RPC exit's tag when the response ends. */
  readonly ended: Promise<string | undefined>
}

/** A live changes stream, its messages collected as they arrive. */
const openLive = (app: Running, token: string, cursor: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const controller = new AbortController()
      const messages: Array<SyncMessage> = []
      const ended = (async () => {
        const response = await fetch(`${app.base}/db/sync`, {
          method: "POST",
          signal: controller.signal,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
          body: `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncChanges", payload: { scope: tasks, cursor }, headers: [] })}\n`
        })
        let exit: string | undefined
        let text = ""
        const decoder = new TextDecoder()
        const body = response.body!.getReader()
        for (;;) {
          const { done, value } = await body.read()
          if (done) break
          text += decoder.decode(value, { stream: true })
          let newline: number
          while ((newline = text.indexOf("\n")) >= 0) {
            const message = JSON.parse(text.slice(0, newline))
            text = text.slice(newline + 1)
            if (message._tag === "Chunk") messages.push(...message.values)
            if (message._tag === "Exit") exit = message.exit._tag
          }
        }
        return exit
      })().catch(() => "aborted")
      return { live: { messages, ended } as Live, controller }
    }),
    ({ controller }) => Effect.sync(() => controller.abort())
  ).pipe(Effect.map(({ live }) => live))

const titles = (messages: ReadonlyArray<SyncMessage>) =>
  messages.flatMap((m) => (m._tag === "SyncBatch" ? m.changes.flatMap((c) => (c._tag === "Upsert" ? [(c.record as { title?: string }).title] : [])) : []))

const untilTime = (at: number) => Effect.suspend(() => Effect.sleep(Math.max(0, at - Date.now())))

describe("a live sync stream ends with its token", () => {
  it.scopedLive("at exp the stream ends with SyncEnd (invalid_token) and delivers nothing committed after it", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const long = yield* app.token(alice)
      const as = app.as(long)
      const project = (yield* as(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* as(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id
      const start = (yield* snapshot(app, long)).checkpoint!

      const short = yield* app.token({ ...alice, ttlSeconds: 2 })
      const expiresAt = expiryOf(short)
      const live = yield* openLive(app, short, start.cursor)
      yield* as(tracker.Task.rename({ target: task, input: { title: "before exp" } }))
      // Delivered while the token holds.
      while (!titles(live.messages).includes("before exp")) yield* Effect.sleep("20 millis")
      assert.isBelow(Date.now(), expiresAt, "the token still held when the change arrived")

      yield* untilTime(expiresAt)
      yield* as(tracker.Task.rename({ target: task, input: { title: "after exp" } }))
      const exit = yield* Effect.promise(() => live.ended)
      assert.strictEqual(exit, "Success", "the stream ends cleanly")
      const last = live.messages[live.messages.length - 1]!
      assert.deepStrictEqual(last, {
        _tag: "SyncEnd",
        reason: "invalid_token",
        message: "The access token this stream was opened with expired; get a new token and resume from your last checkpoint."
      })
      assert.notInclude(titles(live.messages), "after exp", "nothing committed after exp is sent on the stream")
      assert.strictEqual(live.messages.filter((m) => m._tag === "SyncEnd").length, 1)
    })
  )

  it.scopedLive("the client takes a fresh token and resumes without a resnapshot; a new role resnapshots", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const long = yield* app.token(alice)
      const as = app.as(long)
      const project = (yield* as(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* as(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id

      // The token source: a fresh short-lived token for every request, as `who` says now.
      const who = yield* Ref.make<Who>({ ...alice, ttlSeconds: 2 })
      const issued = yield* Ref.make<ReadonlyArray<string>>([])
      const token = Effect.flatMap(Ref.get(who), (w) => Effect.tap(app.token(w), (t) => Ref.update(issued, (all) => [...all, t])))
      const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token })
      const client = yield* SyncClient.make({ file: localFile("alice"), scope: tasks, rpc })
      yield* client.syncOnce
      yield* Effect.forkScoped(client.run)
      const titleIs = (title: string) =>
        client.live("Task").pipe(
          Stream.filter((rows) => rows.some((r) => r.id === task && (r.record as { title?: string }).title === title)),
          Stream.runHead
        )

      // Past the first token's expiry, a change reaches the client over a stream opened with a later token.
      const first = expiryOf((yield* Ref.get(issued))[0]!)
      yield* untilTime(first + 500)
      yield* as(tracker.Task.rename({ target: task, input: { title: "after the first token" } }))
      yield* titleIs("after the first token")
      const status = yield* client.status.get
      assert.strictEqual(status.resnapshots, 0, "the same view resumes from the durable cursor")
      assert.isAbove((yield* Ref.get(issued)).length, 2, "later requests carried fresh tokens")

      // The next token carries the admin role: the view changed, so the server sends the resnapshot path.
      yield* Ref.set(who, { ...alice, roles: ["admin"], ttlSeconds: 2 })
      yield* untilTime(expiryOf((yield* Ref.get(issued)).at(-1)!) + 500)
      yield* as(tracker.Task.rename({ target: task, input: { title: "as admin" } }))
      yield* titleIs("as admin")
      while ((yield* client.status.get).resnapshots === 0) yield* Effect.sleep("50 millis")
      assert.strictEqual((yield* client.status.get).resnapshots, 1)
      assert.isTrue(Option.isSome((yield* client.status.get).checkpoint))
    })
  )
})

// Client synchronization end to end: the server exactly as `npm start` assembles it,
// real development tokens, writes through the generated bindings on `/db/rpc`, and the
// Node sync client (a local SQLite file) on `/db/sync`. It proves that what one
// transport commits reaches the other live, that a live stream outlives the per-request
// time limit, that sync sees only what the principal may see (org and membership), and
// that a client resumes across a server restart without a resnapshot.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { tracker } from "@cairn/client/generated/tracker"
import type { SyncScope } from "@cairn/domain/Sync"
import { Position } from "@cairn/store"
import { SyncMetrics } from "@cairn/sync"
import { Effect, Metric, Option, Stream } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"

const everything: SyncScope = {
  entities: ["Project", "Member", "Task", "Comment", "Label"].map((name) => ({ from: { kind: "entity" as const, name } }))
}

/** Changes streams the server has opened from a valid cursor (this process's metric registry). */
const resumes = Effect.map(Metric.value(SyncMetrics.resumes), (state) => state.count)

const localFile = (name: string) => join(mkdtempSync(join(tmpdir(), "cairn-sync-client-")), `${name}.sqlite`)

/** A sync client for `who` on `/db/sync`, keeping its data in `file`. */
const syncClient = (app: Running, who: Who, file: string) =>
  Effect.gen(function* () {
    const token = yield* app.token(who)
    const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
    return yield* SyncClient.make({ file, scope: everything, rpc })
  })

/** The local records of one entity, as `field` values, sorted. */
const localValues = (client: SyncClient["Type"], entity: string, field: string) =>
  Effect.map(client.store.dump, (records) =>
    [...records.entries()]
      .filter(([key]) => key.startsWith(`${entity}/`))
      .map(([, record]) => record[field])
      .sort()
  )

/** Waits (up to 15 s) until the client's live view of `entity` satisfies `done`. */
const until = (client: SyncClient["Type"], entity: string, done: (records: ReadonlyArray<Readonly<Record<string, unknown>>>) => boolean) =>
  client.live(entity).pipe(
    Stream.map((rows) => rows.map((row) => row.record)),
    Stream.filter(done),
    Stream.runHead,
    Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage(`the live view of ${entity} ended`), onSome: Effect.succeed })),
    Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => new Error(`${entity} never reached the expected state`) })
  )

describe("sync through the real server", () => {
  it.scopedLive("a client snapshots, then follows /db/rpc commits live on a stream that outlives the request time limit", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_REQUEST_TIMEOUT_MS: "1000" } })
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* alice(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id

      const client = yield* syncClient(app, { sub: "alice", org: "acme" }, localFile("alice"))
      yield* client.syncOnce
      assert.deepStrictEqual(yield* localValues(client, "Project", "name"), ["Apollo"])
      assert.deepStrictEqual(yield* localValues(client, "Task", "title"), ["Launch"])
      assert.deepStrictEqual(yield* localValues(client, "Member", "subject"), ["alice"])

      const resumesBefore = yield* resumes
      yield* Effect.forkScoped(client.run)
      // Longer than CAIRN_REQUEST_TIMEOUT_MS: a live tail is not a request that hangs.
      yield* Effect.sleep("2500 millis")
      yield* alice(tracker.Task.rename({ target: task, input: { title: "Liftoff" } }))
      yield* alice(tracker.Task.create({ input: { projectId: project, title: "Orbit" } }))
      const tasks = yield* until(client, "Task", (rows) => rows.length === 2 && rows.some((r) => r["title"] === "Liftoff"))
      assert.deepStrictEqual(tasks.map((r) => r["title"]).sort(), ["Liftoff", "Orbit"])
      const status = yield* client.status.get
      assert.strictEqual(status.resnapshots, 0)
      assert.isTrue(status.confirmed)
      // One stream carried it all: the client never had to reconnect and resume.
      assert.strictEqual((yield* resumes) - resumesBefore, 1)
    }), 40_000)

  it.scopedLive("a client pointed at a wrong URL or with a refused token fails at once, saying what it expected", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const token = yield* app.token({ sub: "alice", org: "acme" })
      for (const [url, bearer, expected] of [
        // /db/rpc's gate refuses an RPC it does not serve (SyncSnapshot) with a plain 400.
        [`${app.base}/db/rpc`, token, "/db/rpc answered HTTP 400"],
        [`${app.base}/health`, token, "HTTP 405: check that the URL is the server's /db/sync"],
        [`${app.base}/nowhere`, token, "HTTP 404: check that the URL is the server's /db/sync"],
        [`${app.base}/db/sync`, "not-a-token", "HTTP 401"]
      ] as const) {
        const rpc = yield* SyncClient.http({ url, token: Effect.succeed(bearer) })
        const client = yield* SyncClient.make({ file: localFile("wrong"), scope: everything, rpc })
        // The live loop (which retries network failures) gives up at once too: bounded by a timeout only as a safety net.
        const error = yield* client.run.pipe(Effect.flip, Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("hung") }))
        assert.include(String((error as { cause?: unknown }).cause ?? error), expected, url)
      }
    })
  )

  it.scopedLive("refuses a sync request without a token with 401 and WWW-Authenticate", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const response = yield* Effect.promise(() =>
        fetch(`${app.base}/db/sync`, { method: "POST", headers: { "content-type": "application/ndjson" }, body: "{}\n" })
      )
      assert.strictEqual(response.status, 401)
      assert.strictEqual(response.headers.get("www-authenticate"), 'Bearer realm="cairn"')
      const mcpToken = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const misdirected = yield* Effect.promise(() =>
        fetch(`${app.base}/db/sync`, { method: "POST", headers: { authorization: `Bearer ${mcpToken}` }, body: "{}\n" })
      )
      assert.strictEqual(misdirected.status, 401)
      assert.include(misdirected.headers.get("www-authenticate") ?? "", 'error="invalid_token"')
    }))

  it.scopedLive("sync sees only the principal's org and projects; a new membership brings its project's rows", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      yield* alice(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))

      // An admin of another org, and a member of nothing in acme.
      const gina = yield* syncClient(app, { sub: "gina", org: "globex", roles: ["admin"] }, localFile("gina"))
      yield* gina.syncOnce
      assert.strictEqual((yield* gina.store.dump).size, 0)
      const carol = yield* syncClient(app, { sub: "carol", org: "acme" }, localFile("carol"))
      yield* carol.syncOnce
      assert.strictEqual((yield* carol.store.dump).size, 0)

      yield* Effect.forkScoped(carol.run)
      yield* Effect.forkScoped(gina.run)
      yield* root(tracker.Member.add({ input: { projectId: project, subject: "carol", role: "viewer", email: "carol@acme.test" } }))
      yield* until(carol, "Task", (rows) => rows.length === 1)
      assert.deepStrictEqual(yield* localValues(carol, "Project", "name"), ["Apollo"])
      assert.deepStrictEqual(yield* localValues(carol, "Task", "title"), ["Launch"])
      assert.deepStrictEqual(yield* localValues(carol, "Member", "subject"), ["alice", "carol"])
      // Member.email is for admins only: it is not in carol's copy at all.
      for (const [key, record] of yield* carol.store.dump) {
        if (key.startsWith("Member/")) assert.notProperty(record, "email")
      }
      // Later changes follow; the other org still has nothing.
      yield* alice(tracker.Task.create({ input: { projectId: project, title: "Orbit" } }))
      yield* until(carol, "Task", (rows) => rows.length === 2)
      assert.strictEqual((yield* gina.store.dump).size, 0)
    }), 40_000)

  it.scopedLive("a client resumes from its file across a server restart, without a resnapshot", () =>
    Effect.gen(function* () {
      const file = localFile("alice")
      const first = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp()
          const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
          const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
          yield* alice(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))
          const client = yield* syncClient(app, { sub: "alice", org: "acme" }, file)
          yield* client.syncOnce
          const status = yield* client.status.get
          return { app, project, checkpoint: Option.getOrThrow(status.checkpoint) }
        })
      )

      const app = yield* startApp({ restartOf: first.app })
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      yield* alice(tracker.Task.create({ input: { projectId: first.project, title: "Orbit" } }))
      const client = yield* syncClient(app, { sub: "alice", org: "acme" }, file)
      // Restored from disk before anything is fetched.
      assert.deepStrictEqual(yield* localValues(client, "Task", "title"), ["Launch"])
      yield* client.syncOnce
      assert.deepStrictEqual(yield* localValues(client, "Task", "title"), ["Launch", "Orbit"])
      const status = yield* client.status.get
      assert.strictEqual(status.resnapshots, 0)
      const checkpoint = Option.getOrThrow(status.checkpoint)
      assert.notStrictEqual(checkpoint.cursor, first.checkpoint.cursor)
      assert.isAbove(Position.decode(checkpoint.position)!, Position.decode(first.checkpoint.position)!)
    }), 40_000)
})

// Storage faults through the real App: a registered database whose file is deleted, emptied,
// damaged, swapped for another org's file, or removed while the server runs is refused
// (503 `unavailable` with the request id) and never recreated, so an acknowledged receipt is
// never silently lost and a replayed invocation id never commits again as a new intent.
// Every other org keeps working; the fault is counted in `cairn_storage_faults_total{kind}`.
import { createHash } from "node:crypto"
import { copyFileSync, existsSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeSync, closeSync } from "node:fs"
import { get } from "node:http"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { DatabaseKey } from "@cairn/domain/Ids"
import { databaseId } from "@cairn/store/Databases"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type Running, startApp } from "./support/app.js"
import { type Answer, mcp, rpc, sync } from "@cairn/testkit/Wire"
import { createProject, entity, projects } from "./support/requests.js"


const fileOf = (dataDir: string, org: string) => join(dataDir, "databases", `${databaseId(DatabaseKey.make(org))}.sqlite`)
const digest = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex")

/** `cairn_storage_faults_total{kind}` as the test hook reports it. */
const faultCount = (app: Running, kind: string) =>
  Effect.promise(async () => {
    // A fresh connection: a pooled one may still point at the stopped server on this port.
    const text = await new Promise<string>((resolve, reject) =>
      get(`${app.base}/__test/metrics`, { agent: false }, (response) => {
        let body = ""
        response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk)).on("end", () => resolve(body))
      }).on("error", reject)
    )
    const { metrics } = JSON.parse(text) as { metrics: Array<{ name: string; tags: Record<string, string>; count: number }> }
    return metrics.filter((m) => m.name === "cairn_storage_faults_total" && m.tags.kind === kind).reduce((n, m) => n + m.count, 0)
  })

const assertUnavailable = (label: string, answer: Answer) => {
  assert.strictEqual(answer.status, 503, `${label}: ${answer.text.slice(0, 300)}`)
  const body = JSON.parse(answer.text)
  assert.strictEqual(body.error, "unavailable", label)
  assert.strictEqual(body.requestId, answer.headers.get("x-request-id"), label)
  assert.include(body.message, body.requestId, label)
  for (const word of ["sqlite", "StorageFault", "ActivationError", "missing", "corrupt", "foreign"]) assert.notInclude(answer.text, word, label)
}

const committed = (label: string, answer: Answer) => {
  assert.strictEqual(answer.status, 200, `${label}: ${answer.text.slice(0, 300)}`)
  assert.strictEqual((answer.value as { outcome?: string } | undefined)?.outcome, "committed", `${label}: ${answer.text.slice(0, 300)}`)
  return answer.value as { readonly position: string; readonly invocationId: string }
}

/** A first run: acme commits `acknowledged` (and, with `bulk`, enough rows for a file of several hundred KiB); globex commits one. */
const firstRun = (bulk = false) =>
  Effect.scoped(
    Effect.gen(function* () {
      const app = yield* startApp()
      const acme = yield* app.token({ sub: "alice", org: "acme" })
      const globex = yield* app.token({ sub: "gina", org: "globex" })
      const acknowledged = uuidv7()
      const receipt = committed("acme first commit", yield* rpc(app, acme, "Mutate", createProject("Apollo", acknowledged)))
      if (bulk) {
        yield* Effect.forEach(
          Array.from({ length: 120 }, (_, i) => i),
          (i) => Effect.map(rpc(app, acme, "Mutate", createProject(`Bulk ${i}`, uuidv7(), "x".repeat(1900))), (a) => committed(`bulk ${i}`, a)),
          { concurrency: 8 }
        )
      }
      committed("globex first commit", yield* rpc(app, globex, "Mutate", createProject("Gemini", uuidv7())))
      return { app, acknowledged, receipt }
    })
  )

/** After the damage, on a restarted server: acme is refused everywhere and its replay does not commit; globex works. */
const refusedAfterRestart = (previous: Running, acknowledged: string, kind: string) =>
  Effect.gen(function* () {
    const app = yield* startApp({ restartOf: previous })
    const before = yield* faultCount(app, kind)
    const acme = yield* app.token({ sub: "alice", org: "acme" })
    const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
    // The acknowledged invocation, sent again: never executed as a new intent.
    assertUnavailable("replayed invocation", yield* rpc(app, acme, "Mutate", createProject("Apollo", acknowledged)))
    assertUnavailable("new invocation", yield* rpc(app, acme, "Mutate", createProject("Zeus", uuidv7())))
    assertUnavailable("query", yield* rpc(app, acme, "Query", { query: projects }))
    assertUnavailable("mcp query", yield* mcp(app, agent, "query", { query: projects }))
    assertUnavailable("sync snapshot", yield* sync(app, acme, "SyncSnapshot", { scope: { entities: [{ from: entity("Project") }] } }))
    // Counted once per process, whoever trips over it.
    assert.strictEqual((yield* faultCount(app, kind)) - before, 1, `cairn_storage_faults_total{kind=${kind}}`)
    // Every other tenant keeps working.
    const globex = yield* app.token({ sub: "gina", org: "globex" })
    committed("globex after the fault", yield* rpc(app, globex, "Mutate", createProject("Mercury", uuidv7())))
    const listed = yield* rpc(app, globex, "Query", { query: projects })
    assert.strictEqual(listed.status, 200)
    return app
  })

describe("storage faults through the real App", () => {
  it.scopedLive("a deleted file (with its WAL) is `missing`: refused, never recreated", () =>
    Effect.gen(function* () {
      const { app, acknowledged } = yield* firstRun()
      const file = fileOf(app.dataDir, "acme")
      for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
      yield* refusedAfterRestart(app, acknowledged, "missing")
      assert.isFalse(existsSync(file), "the missing file was recreated")
    }), 60_000)

  it.scopedLive("a file truncated to 0 bytes is `empty`: refused, left as it is", () =>
    Effect.gen(function* () {
      const { app, acknowledged } = yield* firstRun()
      const file = fileOf(app.dataDir, "acme")
      truncateSync(file, 0)
      yield* refusedAfterRestart(app, acknowledged, "empty")
      assert.strictEqual(statSync(file).size, 0, "the emptied file was written to")
    }), 60_000)

  it.scopedLive("64 KiB of garbage mid-file is `corrupt` (quick_check at open): refused, not written to", () =>
    Effect.gen(function* () {
      const { app, acknowledged } = yield* firstRun(true)
      const file = fileOf(app.dataDir, "acme")
      const size = statSync(file).size
      assert.isAbove(size, 3 * 65536, "the file is large enough for garbage in its middle")
      const garbage = createHash("sha512").update("garbage").digest()
      const block = Buffer.alloc(65536)
      for (let i = 0; i < block.length; i++) block[i] = garbage[i % garbage.length]! ^ (i & 0xff)
      const fd = openSync(file, "r+")
      writeSync(fd, block, 0, block.length, Math.floor(size / 2 / 4096) * 4096)
      closeSync(fd)
      const damaged = digest(file)
      yield* refusedAfterRestart(app, acknowledged, "corrupt")
      assert.strictEqual(digest(file), damaged, "the corrupt file was written to")
    }), 90_000)

  it.scopedLive("another org's file in its place is `foreign` (install id): refused, left as it is", () =>
    Effect.gen(function* () {
      const { app, acknowledged } = yield* firstRun()
      const file = fileOf(app.dataDir, "acme")
      copyFileSync(fileOf(app.dataDir, "globex"), file)
      rmSync(file + "-wal", { force: true })
      const swapped = digest(file)
      yield* refusedAfterRestart(app, acknowledged, "foreign")
      assert.strictEqual(digest(file), swapped, "the foreign file was written to")
    }), 60_000)

  it.scopedLive("a clean stop checkpoints: the WAL is gone (or empty), so deleting it loses nothing", () =>
    Effect.gen(function* () {
      const { app, acknowledged, receipt } = yield* firstRun()
      const wal = fileOf(app.dataDir, "acme") + "-wal"
      assert.isTrue(!existsSync(wal) || statSync(wal).size === 0, "a clean stop left WAL frames behind")
      rmSync(wal, { force: true })
      const restarted = yield* startApp({ restartOf: app })
      const before = yield* faultCount(restarted, "missing")
      const acme = yield* restarted.token({ sub: "alice", org: "acme" })
      // The acknowledged invocation replays its stored receipt: the same position, not a new commit.
      const replay = committed("replay", yield* rpc(restarted, acme, "Mutate", createProject("Apollo", acknowledged)))
      assert.strictEqual(replay.position, receipt.position)
      const listed = yield* rpc(restarted, acme, "Query", { query: projects })
      assert.deepStrictEqual((listed.value as { rows: ReadonlyArray<unknown> }).rows.length, 1)
      assert.strictEqual(yield* faultCount(restarted, "missing"), before)
    }), 60_000)

  it.scopedLive("`databases/` removed while running: nothing more is acknowledged, and a restart refuses instead of starting empty", () =>
    Effect.gen(function* () {
      const app = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp()
          const acme = yield* app.token({ sub: "alice", org: "acme" })
          const acknowledged = uuidv7()
          committed("before removal", yield* rpc(app, acme, "Mutate", createProject("Apollo", acknowledged)))
          const before = yield* faultCount(app, "missing")
          rmSync(join(app.dataDir, "databases"), { recursive: true, force: true })
          // The open database's file is gone: a write is refused, not acknowledged into an unlinked file.
          assertUnavailable("write after removal", yield* rpc(app, acme, "Mutate", createProject("Lost", uuidv7())))
          assertUnavailable("replay after removal", yield* rpc(app, acme, "Mutate", createProject("Apollo", acknowledged)))
          assertUnavailable("query after removal", yield* rpc(app, acme, "Query", { query: projects }))
          assert.strictEqual((yield* faultCount(app, "missing")) - before, 1)
          // A new org (never registered) is created as usual.
          const initech = yield* app.token({ sub: "ian", org: "initech" })
          committed("new org", yield* rpc(app, initech, "Mutate", createProject("Io", uuidv7())))
          return { app, acknowledged }
        })
      )
      const restarted = yield* refusedAfterRestart(app.app, app.acknowledged, "missing")
      const initech = yield* restarted.token({ sub: "ian", org: "initech" })
      const listed = yield* rpc(restarted, initech, "Query", { query: projects })
      assert.deepStrictEqual((listed.value as { rows: ReadonlyArray<unknown> }).rows.length, 1)
    }), 60_000)
})

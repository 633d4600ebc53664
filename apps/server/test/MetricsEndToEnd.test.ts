// The operator's Prometheus endpoint through the real App: RPC, MCP and sync traffic (a budget
// failure on each transport, a resnapshot, a rejected, a replayed and a conflicting mutation,
// a live stream that receives a commit, a storage fault, an eviction) is driven from outside,
// then `GET /metrics` on the separate operator listener is parsed with a real Prometheus
// text-format parser and every metric the issue lists must have moved. The public port never
// serves it.
import { readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { DatabaseKey } from "@cairn/domain/Ids"
import { databaseId } from "@cairn/store/Databases"
import { freePort } from "@cairn/testkit/freePort"
import { mcp, rpc, sync } from "@cairn/testkit/Wire"
import { Cause, Effect, Exit } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type Running, startApp } from "./support/app.js"
import { scrape, scrapeText, seriesNames, sumOf, total } from "./support/scrape.js"
import { createProject, entity, projects } from "./support/requests.js"

const dashboard = JSON.parse(readFileSync(fileURLToPath(new URL("../../../docs/grafana-dashboard.json", import.meta.url)), "utf8")) as {
  readonly panels: ReadonlyArray<{ readonly title: string; readonly targets: ReadonlyArray<{ readonly expr: string }> }>
}

const archive = (id: string, invocationId: string) => ({
  operation: { kind: "operation", owner: entity("Project"), name: "archive" },
  target: { kind: "entity", entity: "Project", id },
  input: {},
  invocationId
})
/** Three values where the operator allows two (`CAIRN_QUERY_MAX_IN_VALUES=2`). */
const tooWide = { op: "in", path: ["name"], value: ["a", "b", "c"] }
const projectScope = { entities: [{ from: entity("Project") }] }

/** A live changes stream held open: its first batch read, then each next one on demand. */
const openStream = (app: Running, token: string, cursor: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const controller = new AbortController()
      const response = await fetch(`${app.base}/db/sync`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
        body: `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncChanges", payload: { scope: projectScope, cursor }, headers: [] })}\n`,
        signal: controller.signal
      })
      const reader = response.body!.getReader()
      let buffer = ""
      const next = async (): Promise<any> => {
        for (;;) {
          const newline = buffer.indexOf("\n")
          if (newline >= 0) {
            const line = buffer.slice(0, newline)
            buffer = buffer.slice(newline + 1)
            return JSON.parse(line)
          }
          const { done, value } = await reader.read()
          if (done) throw new Error(`stream ended: ${buffer}`)
          buffer += new TextDecoder().decode(value)
        }
      }
      return { status: response.status, next, controller }
    }),
    (stream) => Effect.sync(() => stream.controller.abort())
  )

describe("the Prometheus endpoint through the real App", () => {
  it.scopedLive("after RPC, MCP and sync traffic, every listed metric moved; the public port does not serve it", () =>
    Effect.gen(function* () {
      const metricsPort = yield* freePort()
      const app = yield* startApp({
        env: { CAIRN_METRICS_PORT: String(metricsPort), CAIRN_QUERY_MAX_IN_VALUES: "2", CAIRN_MAX_OPEN_DATABASES: "1" }
      })
      const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`
      const acme = yield* app.token({ sub: "alice", org: "acme", roles: ["admin"] })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })

      // RPC: committed, replayed, conflict, rejected; a query; a budget failure.
      const invocation = uuidv7()
      const created = yield* rpc(app, acme, "Mutate", createProject("Apollo", invocation))
      assert.strictEqual(created.value?.outcome, "committed", created.text)
      const replayed = yield* rpc(app, acme, "Mutate", createProject("Apollo", invocation))
      assert.strictEqual(replayed.value?.outcome, "committed", replayed.text)
      const conflict = yield* rpc(app, acme, "Mutate", createProject("Other", invocation))
      assert.strictEqual(conflict.error?.code, "invocation_conflict", conflict.text)
      const projectId = (yield* rpc(app, acme, "Query", { query: { ...projects, select: { id: { path: ["id"] } } } })).value.rows[0].id
      assert.isString(projectId)
      yield* rpc(app, acme, "Mutate", archive(projectId, uuidv7()))
      const rejected = yield* rpc(app, acme, "Mutate", archive(projectId, uuidv7()))
      assert.strictEqual(rejected.error?.code, "operation_rejected", rejected.text)
      assert.strictEqual((yield* rpc(app, acme, "Query", { query: { ...projects, where: tooWide } })).error?.code, "query_budget_exceeded")

      // MCP: a query and a budget failure.
      assert.isUndefined((yield* mcp(app, agent, "query", { query: projects })).error)
      assert.strictEqual((yield* mcp(app, agent, "query", { query: { ...projects, where: tooWide } })).error?.code, "query_budget_exceeded")

      // Sync: a snapshot, a budget failure, a resnapshot, and a live stream that receives a commit.
      const snapshot = yield* sync(app, acme, "SyncSnapshot", { scope: projectScope })
      assert.isString(snapshot.value?.checkpoint?.cursor, snapshot.text)
      const tooWideScope = { entities: [{ from: entity("Project"), where: tooWide }] }
      assert.strictEqual((yield* sync(app, acme, "SyncSnapshot", { scope: tooWideScope })).error?.code, "query_budget_exceeded")
      assert.strictEqual((yield* sync(app, acme, "SyncChanges", { scope: projectScope, cursor: "x" })).value?._tag, "Resnapshot")
      const stream = yield* openStream(app, acme, snapshot.value.checkpoint.cursor)
      assert.strictEqual(stream.status, 200)
      const first = yield* Effect.promise(() => stream.next())
      assert.strictEqual(first.values?.[0]?._tag, "SyncBatch", JSON.stringify(first))
      yield* rpc(app, acme, "Mutate", createProject("Live", uuidv7()))
      const second = yield* Effect.promise(() => stream.next())
      assert.strictEqual(second.values?.[0]?._tag, "SyncBatch", JSON.stringify(second))

      // A storage fault: an open database's file removed under it. Two more orgs: the idle one is evicted (capacity 1).
      const doomed = yield* app.token({ sub: "dora", org: "doomed" })
      yield* rpc(app, doomed, "Mutate", createProject("Doomed", uuidv7()))
      const file = join(app.dataDir, "databases", `${databaseId(DatabaseKey.make("doomed"))}.sqlite`)
      for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
      assert.strictEqual((yield* rpc(app, doomed, "Query", { query: projects })).status, 503)
      const globex = yield* app.token({ sub: "gina", org: "globex" })
      yield* rpc(app, globex, "Mutate", createProject("Gemini", uuidv7()))
      const initech = yield* app.token({ sub: "ian", org: "initech" })
      yield* rpc(app, initech, "Mutate", createProject("Io", uuidv7()))

      const scraped = yield* scrapeText(metricsUrl)
      assert.strictEqual(scraped.status, 200)
      assert.match(scraped.contentType, /^text\/plain/)
      assert.notMatch(scraped.text, /^# UNIT /m)
      const families = yield* scrape(metricsUrl)
      const moved = (name: string, labels: Record<string, string> = {}) => {
        const value = total(families, name, labels)
        assert.isAbove(value, 0, `${name}${JSON.stringify(labels)} did not move (families: ${families.map((f) => f.name).join(", ")})`)
      }

      // Request latency by route, transport and verb.
      moved("cairn_http_request_duration_ms", { route: "/db/rpc" })
      moved("cairn_http_request_duration_ms", { route: "/mcp" })
      moved("cairn_http_request_duration_ms", { route: "/db/sync" })
      for (const [transport, verb] of [["rpc", "query"], ["rpc", "mutate"], ["mcp", "query"], ["sync", "snapshot"]]) {
        moved("cairn_engine_verb_duration_ms", { transport: transport!, verb: verb! })
      }
      // Query-budget failures by limit, on every transport (counted once, in the engine).
      for (const transport of ["rpc", "mcp", "sync"]) moved("cairn_query_budget_failures_total", { transport, limit: "maxInValues" })
      // Activations: count, latency, open gauge, evictions.
      moved("cairn_database_activations_total")
      moved("cairn_database_activation_duration_ms")
      moved("cairn_databases_open")
      moved("cairn_database_evictions_total", { reason: "capacity" })
      // Snapshot sizes (records, bytes), resumes and resnapshots by reason.
      moved("cairn_sync_snapshot_records")
      assert.isAbove(sumOf(families, "cairn_sync_snapshot_page_bytes"), 0)
      moved("cairn_sync_resumes_total")
      moved("cairn_sync_resnapshots_total", { reason: "cursor_mismatch" })
      // Receipt outcomes.
      for (const outcome of ["committed", "replayed", "conflict", "rejected"]) moved("cairn_mutations_total", { outcome })
      // Storage faults by kind.
      moved("cairn_storage_faults_total", { kind: "missing" })
      // Sync lag (commit to delivery), live streams, writer group size; the queue depth is exported (empty now).
      moved("cairn_sync_lag_ms")
      assert.strictEqual(total(families, "cairn_sync_live_streams"), 1)
      moved("cairn_writer_group_size")
      assert.strictEqual(total(families, "cairn_writer_queue_depth"), 0)

      // Every family: the prefix, help text, and labels from closed sets (no ids, no tokens, no payloads).
      const allowedLabels = new Set(["route", "status", "rpc", "outcome", "transport", "verb", "limit", "reason", "kind", "origin", "le"])
      const cairn = families.filter((f) => f.name.startsWith("cairn_"))
      assert.isAtLeast(cairn.length, 20)
      for (const family of families) {
        assert.isTrue(family.name.startsWith("cairn_"), `${family.name} lacks the cairn_ prefix`)
        assert.isAbove(family.help.length, 10, `${family.name} has no help text`)
        for (const sample of family.samples) {
          for (const [label, value] of Object.entries(sample.labels)) {
            assert.isTrue(allowedLabels.has(label), `${family.name}: unexpected label ${label}`)
            assert.notInclude(value, "acme", `${family.name}{${label}}`)
            assert.notInclude(value, "Apollo", `${family.name}{${label}}`)
          }
        }
      }
      for (const secret of [acme, agent, "Apollo", "acme", projectId, invocation]) assert.notInclude(scraped.text, secret)

      // docs/grafana-dashboard.json: every panel expression names only series this scrape exports.
      const exported = seriesNames(families)
      assert.isAtLeast(dashboard.panels.length, 10)
      for (const panel of dashboard.panels) {
        assert.isAbove(panel.targets.length, 0, panel.title)
        for (const target of panel.targets) {
          const names = [...target.expr.matchAll(/\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?=\s*(?:\{|\[|\)|$))/g)].map((m) => m[0]).filter((n) => n.startsWith("cairn_"))
          assert.isAbove(names.length, 0, `${panel.title}: ${target.expr} names no Cairn metric`)
          for (const name of names) assert.isTrue(exported.has(name), `${panel.title}: ${name} is not exported`)
        }
      }

      // The public port does not serve metrics.
      const onPublic = yield* Effect.promise(() => fetch(`${app.base}/metrics`).then((r) => r.status))
      assert.strictEqual(onPublic, 404)
    }), 60_000)

  it.scopedLive("a full writer queue counts overloaded receipts, and the queue depth returns to zero", () =>
    Effect.gen(function* () {
      const metricsPort = yield* freePort()
      // Every group holds the write connection 200 ms before its transaction; one invocation per group, two may wait.
      const app = yield* startApp({
        env: { CAIRN_METRICS_PORT: String(metricsPort), CAIRN_WRITER_QUEUE_LIMIT: "2", CAIRN_GROUP_COMMIT_MAX_BATCH: "1" },
        writerPause: Effect.sleep("200 millis")
      })
      const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`
      const acme = yield* app.token({ sub: "alice", org: "acme" })
      // Metrics are the process's: this test reads what its own traffic added.
      const before = yield* scrape(metricsUrl)
      const answers = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => i),
        (i) => rpc(app, acme, "Mutate", createProject(`P${i}`, uuidv7())),
        { concurrency: "unbounded" }
      )
      const refused = answers.filter((a) => a.status === 503).length
      assert.isAbove(refused, 0, "some invocations must find the queue full")
      const families = yield* scrape(metricsUrl)
      const added = (outcome: string) =>
        total(families, "cairn_mutations_total", { outcome }) - total(before, "cairn_mutations_total", { outcome })
      assert.strictEqual(added("overloaded"), refused)
      assert.strictEqual(added("committed"), answers.length - refused)
      assert.strictEqual(total(families, "cairn_writer_queue_depth"), 0)
    }), 60_000)

  it.scopedLive("the operator switches MCP and sync off: their routes are 404; no metrics port, no listener", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_MCP: "off", CAIRN_SYNC: "off" } })
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      assert.strictEqual((yield* mcp(app, agent, "query", { query: projects })).status, 404)
      assert.strictEqual((yield* sync(app, db, "SyncSnapshot", { scope: projectScope })).status, 404)
      const discovery = yield* Effect.promise(() => fetch(`${app.base}/.well-known/oauth-protected-resource/mcp`).then((r) => r.status))
      assert.strictEqual(discovery, 404)
      assert.strictEqual((yield* rpc(app, db, "Query", { query: projects })).status, 200)
    }), 60_000)

  it.scopedLive("compatibility: only the MCP protocol versions the operator lists are accepted", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_MCP_PROTOCOL_VERSIONS: "2025-06-18" } })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      // The wire helper speaks 2025-06-18: accepted.
      assert.isUndefined((yield* mcp(app, agent, "query", { query: projects })).error)
      const post = (headers: Record<string, string>, body: unknown) =>
        Effect.promise(() =>
          fetch(`${app.base}/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${agent}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
            body: JSON.stringify(body)
          }).then(async (r) => ({ status: r.status, text: await r.text() }))
        )
      const listTools = { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }
      const older = yield* post({ "mcp-protocol-version": "2025-03-26" }, listTools)
      assert.strictEqual(older.status, 400, older.text)
      assert.include(older.text, "this deployment accepts 2025-06-18")
      const initialize = (protocolVersion: string) => ({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion, capabilities: {}, clientInfo: { name: "probe", version: "1" } }
      })
      assert.strictEqual((yield* post({}, initialize("2024-11-05"))).status, 400)
      const accepted = yield* post({}, initialize("2025-06-18"))
      assert.strictEqual(accepted.status, 200, accepted.text)
      assert.include(accepted.text, "2025-06-18")
    }), 60_000)

  it.scopedLive("compatibility: a protocol version the server does not implement stops the start, named", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(startApp({ env: { CAIRN_MCP_PROTOCOL_VERSIONS: "2025-06-18,2023-01-01" } }))
      assert.isTrue(Exit.isFailure(exit))
      const rendered = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
      assert.include(rendered, "CAIRN_MCP_PROTOCOL_VERSIONS: 2023-01-01 is not a version this server implements")
    }), 60_000)

  it.scopedLive("/ready answers ready with named checks, and not ready once the data directory cannot be written; it discloses nothing", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const ready = yield* Effect.promise(() => fetch(`${app.base}/ready`).then(async (r) => ({ status: r.status, text: await r.text() })))
      assert.strictEqual(ready.status, 200, ready.text)
      assert.deepStrictEqual(JSON.parse(ready.text), {
        status: "ready",
        checks: { started: "ok", storage: "ok", issuerKeys: "ok", dataDirectory: "ok", accepting: "ok" }
      })
      rmSync(app.dataDir, { recursive: true, force: true })
      const failing = yield* Effect.promise(() => fetch(`${app.base}/ready`).then(async (r) => ({ status: r.status, text: await r.text() })))
      assert.strictEqual(failing.status, 503, failing.text)
      assert.strictEqual(JSON.parse(failing.text).checks.dataDirectory, "failing")
      for (const word of [app.dataDir, "tracker", "Project", "acme"]) assert.notInclude(failing.text, word)
      // Liveness is unaffected.
      assert.strictEqual(yield* Effect.promise(() => fetch(`${app.base}/health`).then((r) => r.status)), 200)
    }), 60_000)
})

/**
 * `npm run bench -- hostile`: how long the worst request we know of can hold the server.
 * The server runs as `npm start` runs it, in its own process; while one hostile request
 * at a time is in flight (each under the body limit: 40,000 malformed select entries,
 * 450,000 invalid describe kinds, 10,000-deep nesting, 100,000 keys, a 1 MB string, on
 * RPC, MCP and sync; a sync snapshot page under a scope on an unindexed field of a big table;
 * a catch-up under a policy that reads other rows, one batch short of its bound and past it),
 * a second connection polls `/health` and records its latency. The
 * baseline is the same poll while ordinary requests of the same size run. Prints
 * `hostile: worst_stall_ms=<n> baseline_ms=<n> worst=<request>` (target: under 50 ms).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect, ManagedRuntime } from "effect"
import { CairnClient } from "@cairn/client/CairnClient"
import { tracker } from "@cairn/client/generated/tracker"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Settings, settingsConfig } from "@cairn/server/operations/Settings"
import { freePort } from "@cairn/testkit/freePort"
import { defaults as syncDefaults } from "@cairn/sync/SyncConfig"

const ROUNDS = 3
/** Rows of the big table the sync snapshot shape scans (more than one page's work budget, 10,000). */
const TABLE_ROWS = Number(process.env["CAIRN_BENCH_HOSTILE_ROWS"] ?? 12_000)
/** Commits a cross-row catch-up replays in one batch: one short of its bound (`CAIRN_SYNC_MAX_BATCH_COMMITS`). */
const CATCH_UP = Number(process.env["CAIRN_SYNC_MAX_BATCH_COMMITS"] ?? syncDefaults.maxBatchCommits) - 1

const waitHealthy = async (base: string) => {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) return
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error("the server did not become healthy")
}

/** The worst `/health` latency observed while `work` runs, polling from its own connection. */
const stallDuring = async (base: string, work: () => Promise<unknown>): Promise<number> => {
  let running = true
  let worst = 0
  const poll = (async () => {
    while (running) {
      const start = performance.now()
      await fetch(`${base}/health`).then((r) => r.arrayBuffer())
      worst = Math.max(worst, performance.now() - start)
      await new Promise((r) => setTimeout(r, 2))
    }
  })()
  await work()
  running = false
  await poll
  return worst
}

const rpcBody = (tag: string, payload: string) => `{"_tag":"Request","id":"1","tag":"${tag}","payload":${payload},"headers":[]}`
const mcpBody = (tool: string, args: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${tool}","arguments":${args}}}`

export const run = async () => {
  const port = await Effect.runPromise(freePort())
  const issuerPort = await Effect.runPromise(freePort())
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-hostile-"))
  const env = {
    ...process.env,
    CAIRN_PORT: String(port),
    CAIRN_DATA_DIR: dataDir,
    CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${issuerPort}`,
    CAIRN_STAGE: "test"
  }
  const server: ChildProcess = spawn(process.execPath, ["--import", "tsx", "apps/server/src/main.ts"], { env, stdio: "ignore" })
  const base = `http://127.0.0.1:${port}`
  try {
    await waitHealthy(base)
    const config = ConfigProvider.fromMap(new Map(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)))
    const token = (resource: "db" | "mcp") =>
      Effect.runPromise(
        Effect.gen(function* () {
          const settings = yield* settingsConfig
          const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings))
          return yield* signDevToken(dev, {
            subject: "mallory",
            audience: `${base}/${resource}`,
            claims: { org: "acme" },
            scope: accessScopes.join(" "),
            ttlSeconds: 600
          })
        }).pipe(Effect.withConfigProvider(config), Effect.orDie)
      )
    const db = await token("db")
    const mcp = await token("mcp")
    const post = (path: string, bearer: string, body: string, type = "application/json") =>
      fetch(`${base}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": type, accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
        body
      }).then(async (r) => {
        // Read the start of the answer, then hang up (a sync stream stays open).
        const reader = r.body!.getReader()
        await reader.read()
        await reader.cancel()
      })

    const malformedSelect = `{"query":{"version":1,"from":{"kind":"entity","name":"Task"},"select":{${Array.from({ length: 40_000 }, (_, i) => `"c${i}":{"pth":[1]}`).join(",")}}}}`
    const kinds = `{"browse":{"kinds":[${Array.from({ length: 450_000 }, () => "0").join(",")}]}}`
    const deep = `{"browse":${"[".repeat(10_000)}1${"]".repeat(10_000)}}`
    const keys = `{"browse":{${Array.from({ length: 100_000 }, (_, i) => `"k${i}":0`).join(",")}}}`
    const long = `{"search":"${"x".repeat(1_000_000)}"}`
    // The sync shapes: mallory's project holds a big table of tasks (its policy reads the membership).
    const client = ManagedRuntime.make(CairnClient.layerFetch({ baseUrl: base, token: db }))
    const as = <A, E>(call: Effect.Effect<A, E, CairnClient>) => client.runPromise(Effect.orDie(call))
    const project = (await as(tracker.Project.create({ input: { name: "Haystack" } }))).output.id
    const ids: Array<string> = []
    for (let i = 0; i < TABLE_ROWS; i += 16) {
      const made = await Promise.all(
        Array.from({ length: Math.min(16, TABLE_ROWS - i) }, (_, j) => as(tracker.Task.create({ input: { projectId: project, title: `hay ${i + j}` } })))
      )
      for (const m of made) ids.push(m.output.id)
    }
    const needles = `{"entities":[{"from":{"kind":"entity","name":"Task"},"where":{"op":"eq","path":["title"],"value":"needle"}}]}`
    const tasks = `{"entities":[{"from":{"kind":"entity","name":"Task"}}]}`
    /** The checkpoint of a whole snapshot of `scope`, now. */
    const checkpoint = async (scope: string): Promise<string> => {
      let after: string | undefined
      for (;;) {
        const text = await fetch(`${base}/db/sync`, {
          method: "POST",
          headers: { authorization: `Bearer ${db}`, "content-type": "application/ndjson" },
          body: rpcBody("SyncSnapshot", `{"scope":${scope}${after === undefined ? "" : `,"after":${JSON.stringify(after)}`}}`) + "\n"
        }).then((r) => r.text())
        const exit = text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).find((m) => m._tag === "Exit")
        const page = exit.exit.value as { next?: string; checkpoint?: { cursor: string } }
        if (page.checkpoint !== undefined) return page.checkpoint.cursor
        after = page.next
      }
    }
    const far = await checkpoint(tasks)
    const renames = async (count: number) => {
      for (let i = 0; i < count; i += 16) {
        await Promise.all(
          Array.from({ length: Math.min(16, count - i) }, (_, j) => as(tracker.Task.rename({ target: ids[(i + j) % ids.length]!, input: { title: `renamed ${i + j}` } })))
        )
      }
    }
    await renames(Math.ceil(CATCH_UP / 2))
    const near = await checkpoint(tasks)
    await renames(CATCH_UP)
    const changes = (cursor: string) => rpcBody("SyncChanges", `{"scope":${tasks},"cursor":${JSON.stringify(cursor)},"live":false}`) + "\n"

    const hostile: ReadonlyArray<readonly [string, () => Promise<unknown>]> = [
      ["rpc-select-40k", () => post("/db/rpc", db, rpcBody("Query", malformedSelect))],
      ["rpc-kinds-450k", () => post("/db/rpc", db, rpcBody("Describe", kinds))],
      ["rpc-deep-10k", () => post("/db/rpc", db, rpcBody("Describe", deep))],
      ["rpc-keys-100k", () => post("/db/rpc", db, rpcBody("Describe", keys))],
      ["rpc-string-1mb", () => post("/db/rpc", db, rpcBody("Describe", long))],
      ["mcp-select-40k", () => post("/mcp", mcp, mcpBody("query", malformedSelect))],
      ["mcp-kinds-450k", () => post("/mcp", mcp, mcpBody("describe", kinds))],
      ["mcp-deep-10k", () => post("/mcp", mcp, mcpBody("describe", deep))],
      ["sync-deep-10k", () => post("/db/sync", db, rpcBody("SyncSnapshot", `{"scope":${deep}}`) + "\n", "application/ndjson")],
      ["sync-keys-100k", () => post("/db/sync", db, rpcBody("SyncSnapshot", `{"scope":${keys}}`) + "\n", "application/ndjson")],
      [`sync-snapshot-unindexed-${TABLE_ROWS}`, () => post("/db/sync", db, rpcBody("SyncSnapshot", `{"scope":${needles}}`) + "\n", "application/ndjson")],
      [`sync-catch-up-cross-row-${CATCH_UP}`, () => post("/db/sync", db, changes(near), "application/ndjson")],
      [`sync-catch-up-cross-row-${Math.ceil(CATCH_UP / 2) + CATCH_UP}`, () => post("/db/sync", db, changes(far), "application/ndjson")]
    ]
    // Ordinary requests of comparable size: a valid describe with a long search text.
    const ordinary = `{"search":"${"task ".repeat(1_000)}"}`
    let baseline = 0
    const worst = new Map<string, number>()
    for (let round = 0; round < ROUNDS; round++) {
      baseline = Math.max(
        baseline,
        await stallDuring(base, async () => {
          for (let i = 0; i < 20; i++) await post("/db/rpc", db, rpcBody("Describe", ordinary))
        })
      )
      for (const [name, send] of hostile) worst.set(name, Math.max(worst.get(name) ?? 0, await stallDuring(base, send)))
    }
    const [worstName, worstMs] = [...worst].sort((a, b) => b[1] - a[1])[0]!
    for (const [name, ms] of worst) console.log(`  ${name}: ${ms.toFixed(1)} ms`)
    console.log(`hostile: worst_stall_ms=${worstMs.toFixed(1)} baseline_ms=${baseline.toFixed(1)} worst=${worstName}`)
  } finally {
    server.kill("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    server.kill("SIGKILL")
    rmSync(dataDir, { recursive: true, force: true })
  }
}

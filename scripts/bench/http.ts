/**
 * `npm run bench -- http`: the real App (`App(trackerDeployment)`, a child process, see
 * support/appServer.ts) over loopback against a minimal `node:http` + better-sqlite3 server
 * (support/rawServer.ts) on the same Task table, both `synchronous=FULL`, 64 concurrent
 * keep-alive clients in this process:
 * - write: one `Task.create` per request (App: `/db/rpc` Mutate; raw: one insert, one transaction);
 * - read: one indexed page of 50 Tasks by assignee, a different assignee every call (App:
 *   `/db/rpc` Query and `/mcp` tools/call query; raw: one prepared SELECT).
 * Prints `http: write_ratio=.. read_ratio=.. mcp_read_ratio=.. cpu_us_per_write=.. cpu_us_per_read=..
 * fsyncs_per_write=..` (App over raw requests per second; the App process's CPU time per request).
 * fsyncs are counted as committed write transactions: with WAL and `synchronous=FULL` SQLite
 * syncs the WAL once per commit, and the App commits one transaction per writer group (its
 * `cairn_writer_group_size` histogram count), the raw server one per request.
 * Then `http-floor: platform_read_ratio=.. platform_cpu_us_per_read=.. app_over_platform_read=..`:
 * the raw server's read served through @effect/platform alone (support/platformServer.ts), so the
 * share of the gap that is the platform's and the share that is Cairn's are measured in the same run;
 * `lean_platform_read_ratio=.. lean_platform_cpu_us_per_read=.. app_over_lean_platform_read=..`: the
 * same with the body read as the App reads it (its `RequestBody`, not the platform's `request.text`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { Agent, request } from "node:http"
import { dirname, join } from "node:path"
import { createInterface, type Interface } from "node:readline"
import { fileURLToPath } from "node:url"
import { v7 as uuidv7 } from "uuid"

const CLIENTS = 64
const SECONDS = Number(process.env["BENCH_HTTP_SECONDS"] ?? 3)
const ROUNDS = 2
const ASSIGNEES = 10

const here = join(dirname(fileURLToPath(import.meta.url)), "support")

interface Stats {
  readonly cpuUs: number
  readonly groups: number
  readonly groupedWrites: number
}

interface Child {
  readonly info: Record<string, string>
  readonly stats: () => Promise<Stats>
  readonly stop: () => void
}

const start = (file: string, args: ReadonlyArray<string> = []): Promise<Child> =>
  new Promise((resolve, reject) => {
    // BENCH_PROFILE=<dir>: the children write V8 CPU profiles there, resolving @cairn/* to the
    // compiled dist/ (real line numbers; run `npm run build` first).
    const profile = process.env["BENCH_PROFILE"]
    const flags = profile ? ["--cpu-prof", `--cpu-prof-dir=${profile}`] : ["--conditions=@cairn/source"]
    const child: ChildProcess = spawn(process.execPath, [...flags, "--import", "tsx", join(here, file), ...args], {
      env: profile ? { ...process.env, NODE_OPTIONS: "" } : process.env,
      stdio: ["pipe", "pipe", "inherit"]
    })
    const lines: Interface = createInterface({ input: child.stdout! })
    const waiting: Array<(line: string) => void> = []
    lines.on("line", (line) => waiting.shift()?.(line))
    child.on("exit", (code) => code !== 0 && code !== null && reject(new Error(`${file} exited with ${code}`)))
    const next = () => new Promise<string>((r) => waiting.push(r))
    void next().then((line) =>
      resolve({
        info: JSON.parse(line) as Record<string, string>,
        stats: async () => {
          const answer = next()
          child.stdin!.write("stats\n")
          return JSON.parse(await answer) as Stats
        },
        stop: () => child.stdin!.end()
      })
    )
  })

const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS })

const post = (url: string, body: string, headers: Record<string, string>) =>
  new Promise<string>((resolve, reject) => {
    const req = request(url, { method: "POST", agent, headers: { "content-type": "application/json", ...headers } }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode} ${text.slice(0, 300)}`))
        else resolve(text)
      })
    })
    req.on("error", reject)
    req.end(body)
  })

/** `CLIENTS` concurrent loops of `call` for `seconds`; requests per second. */
const load = async (seconds: number, call: (n: number) => Promise<void>) => {
  let done = 0
  const deadline = performance.now() + seconds * 1000
  const began = performance.now()
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < deadline) {
        await call(done)
        done += 1
      }
    })
  )
  return { rate: done / ((performance.now() - began) / 1000), count: done }
}

const expect = (text: string, needle: string) => {
  if (!text.includes(needle)) throw new Error(`unexpected answer: ${text.slice(0, 300)}`)
}

const rpcBody = (tag: string, payload: unknown) => `{"_tag":"Request","id":"1","tag":"${tag}","payload":${JSON.stringify(payload)},"headers":[]}`
const pageOf = (n: number) => ({
  version: 1,
  from: { kind: "entity", name: "Task" },
  where: { op: "eq", path: ["assigneeId"], value: `u${n % ASSIGNEES}` },
  select: { id: { path: ["id"] }, title: { path: ["title"] }, status: { path: ["status"] }, priority: { path: ["priority"] } },
  page: { first: 50 }
})
const taskRef = { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "create" }

interface Side {
  readonly write: (n: number) => Promise<void>
  readonly read: (n: number) => Promise<void>
  readonly mcpRead?: (n: number) => Promise<void>
}

const appSide = async (child: Child): Promise<Side> => {
  const { base, db, mcp } = child.info as { base: string; db: string; mcp: string }
  const auth = { authorization: `Bearer ${db}` }
  const created = await post(
    `${base}/db/rpc`,
    rpcBody("Mutate", { operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" }, input: { name: "Bench" }, invocationId: uuidv7() }),
    auth
  )
  const projectId = /"output":\{"id":"([^"]+)"/.exec(created)?.[1]
  if (!projectId) throw new Error(`no project: ${created}`)
  return {
    write: async (n) => {
      const input = { projectId, title: `task ${n}`, assigneeId: `u${n % ASSIGNEES}`, priority: (n % 5) + 1 }
      expect(await post(`${base}/db/rpc`, rpcBody("Mutate", { operation: taskRef, input, invocationId: uuidv7() }), auth), `"outcome":"committed"`)
    },
    read: async (n) => {
      expect(await post(`${base}/db/rpc`, rpcBody("Query", { query: pageOf(n) }), auth), `"_tag":"Success"`)
    },
    mcpRead: async (n) => {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query","arguments":${JSON.stringify({ query: pageOf(n) })}}}`
      const text = await post(`${base}/mcp`, body, {
        authorization: `Bearer ${mcp}`,
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18"
      })
      expect(text, `"structuredContent"`)
      if (text.includes(`"isError":true`)) throw new Error(text.slice(0, 300))
    }
  }
}

const rawSide = (child: Child): Side => {
  const { base } = child.info as { base: string }
  return {
    write: async (n) => {
      expect(await post(`${base}/write`, JSON.stringify({ projectId: "p", title: `task ${n}`, assigneeId: `u${n % ASSIGNEES}`, priority: (n % 5) + 1 }), {}), `"id"`)
    },
    read: async (n) => {
      expect(await post(`${base}/read`, JSON.stringify({ assigneeId: `u${n % ASSIGNEES}` }), {}), `"items"`)
    }
  }
}

interface Measured {
  readonly rate: number
  readonly cpuPerRequest: number
  readonly fsyncsPerWrite: number
}

/** One phase: requests per second, the server's CPU per request and group commits per write. */
const phase = async (child: Child, call: (n: number) => Promise<void>): Promise<Measured> => {
  const before = await child.stats()
  const { rate, count } = await load(SECONDS, call)
  const after = await child.stats()
  return {
    rate,
    cpuPerRequest: (after.cpuUs - before.cpuUs) / count,
    fsyncsPerWrite: (after.groups - before.groups) / Math.max(1, count)
  }
}

const best = (a: Measured | undefined, b: Measured) => (a === undefined || b.rate > a.rate ? b : a)

export const run = async (): Promise<void> => {
  const [app, raw] = await Promise.all([start("appServer.ts"), start("rawServer.ts")])
  let platform: Child | undefined
  let leanPlatform: Child | undefined
  try {
    const cairn = await appSide(app)
    const baseline = rawSide(raw)
    // Warm up both (JIT, statements, the token cache), then alternate rounds: the shared
    // machine's load drifts, and both sides should see the same drift. Best of each.
    for (const side of [cairn, baseline]) {
      await load(0.5, side.write)
      await load(0.5, side.read)
    }
    await load(0.5, cairn.mcpRead!)
    // BENCH_HTTP_ONLY=write|read|mcp: load the App with that alone for a while (for profiling).
    const only = process.env["BENCH_HTTP_ONLY"] as "write" | "read" | "mcp" | undefined
    if (only !== undefined) {
      const call = only === "write" ? cairn.write : only === "read" ? cairn.read : cairn.mcpRead!
      const m = await phase(app, call)
      console.log(`http-${only}: rps=${m.rate.toFixed(0)} cpu_us=${m.cpuPerRequest.toFixed(0)} fsyncs_per_write=${m.fsyncsPerWrite.toFixed(2)}`)
      return
    }
    // The platform floor reads the raw server's own file (read-only), so both answer the same rows.
    platform = await start("platformServer.ts", [raw.info["file"]!])
    leanPlatform = await start("platformServer.ts", [raw.info["file"]!, "lean"])
    const floor = rawSide(platform)
    const leanFloor = rawSide(leanPlatform)
    await load(0.5, floor.read)
    await load(0.5, leanFloor.read)
    const results: Record<string, Measured | undefined> = {}
    for (let i = 0; i < ROUNDS; i++) {
      results.rawWrite = best(results.rawWrite, await phase(raw, baseline.write))
      results.appWrite = best(results.appWrite, await phase(app, cairn.write))
      results.rawRead = best(results.rawRead, await phase(raw, baseline.read))
      results.appRead = best(results.appRead, await phase(app, cairn.read))
      results.appMcp = best(results.appMcp, await phase(app, cairn.mcpRead!))
      results.platformRead = best(results.platformRead, await phase(platform, floor.read))
      results.leanPlatformRead = best(results.leanPlatformRead, await phase(leanPlatform, leanFloor.read))
    }
    const r = results as Record<string, Measured>
    console.log(
      `http: write_ratio=${(r.appWrite!.rate / r.rawWrite!.rate).toFixed(2)} read_ratio=${(r.appRead!.rate / r.rawRead!.rate).toFixed(2)} ` +
        `mcp_read_ratio=${(r.appMcp!.rate / r.rawRead!.rate).toFixed(3)} cpu_us_per_write=${r.appWrite!.cpuPerRequest.toFixed(0)} ` +
        `cpu_us_per_read=${r.appRead!.cpuPerRequest.toFixed(0)} fsyncs_per_write=${r.appWrite!.fsyncsPerWrite.toFixed(2)}`
    )
    console.log(
      `http-detail: app_write_rps=${r.appWrite!.rate.toFixed(0)} raw_write_rps=${r.rawWrite!.rate.toFixed(0)} app_read_rps=${r.appRead!.rate.toFixed(0)} ` +
        `raw_read_rps=${r.rawRead!.rate.toFixed(0)} app_mcp_read_rps=${r.appMcp!.rate.toFixed(0)} cpu_us_per_mcp_read=${r.appMcp!.cpuPerRequest.toFixed(0)} ` +
        `raw_cpu_us_per_write=${r.rawWrite!.cpuPerRequest.toFixed(0)} raw_cpu_us_per_read=${r.rawRead!.cpuPerRequest.toFixed(0)}`
    )
    // The floor under the App: the same read on @effect/platform alone (see support/platformServer.ts).
    console.log(
      `http-floor: platform_read_ratio=${(r.platformRead!.rate / r.rawRead!.rate).toFixed(2)} platform_cpu_us_per_read=${r.platformRead!.cpuPerRequest.toFixed(0)} ` +
        `app_over_platform_read=${(r.appRead!.rate / r.platformRead!.rate).toFixed(2)} ` +
        `lean_platform_read_ratio=${(r.leanPlatformRead!.rate / r.rawRead!.rate).toFixed(2)} lean_platform_cpu_us_per_read=${r.leanPlatformRead!.cpuPerRequest.toFixed(0)} ` +
        `app_over_lean_platform_read=${(r.appRead!.rate / r.leanPlatformRead!.rate).toFixed(2)}`
    )
  } finally {
    app.stop()
    raw.stop()
    platform?.stop()
    leanPlatform?.stop()
    agent.destroy()
  }
}

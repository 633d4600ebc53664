/**
 * `npm run bench -- startup`: production start from compiled JS (`npm run start:prod`:
 * `node apps/server/dist/cairn.mjs`, the esbuild bundle of `scripts/bundle.mjs`) with a fresh data directory and the
 * embedded defaults, timed from spawn until `/health` answers 200; against `node -e` of a
 * trivial `node:http` server, spawn to its first 200. Brings `dist/` up to date first
 * (`tsc -b tsconfig.build.json`, incremental; `BENCH_STARTUP_NO_BUILD=1` skips it). Median of
 * `BENCH_STARTUP_RUNS` (5) runs each, alternating. Prints
 * `startup: ms_to_healthy=<n> (node_baseline_ms=<n>) ratio=<n> runs=<n> min_ms=<n> max_ms=<n> cpu_ms=<n> node_baseline_cpu_ms=<n>`
 * (CPU time of the started process until healthy, from `/proc`).
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { request } from "node:http"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 5)
const entry = join(root, "apps", "server", "dist", "cairn.mjs")

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

const status = (port: number, path: string) =>
  new Promise<number>((resolve) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.once("error", () => resolve(0))
    req.setTimeout(1000, () => req.destroy())
    req.end()
  })

/** CPU milliseconds (user + system) a live process has used, from `/proc` (Linux; 0 elsewhere). */
const cpuMillis = (pid: number | undefined) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return 0
  }
}

/**
 * Spawns `args`, polls `path` every 5 ms; answers the milliseconds from spawn to its first 200
 * and the CPU milliseconds the process used until then (steadier than wall time on a shared machine).
 */
const timeToHealthy = async (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, port: number, path: string) => {
  const start = performance.now()
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}: ${stderr.slice(0, 2000)}`)
      if ((await status(port, path)) === 200) return { ms: performance.now() - start, cpu: cpuMillis(child.pid) }
      if (performance.now() - start > 60_000) throw new Error(`not healthy after 60 s: ${stderr.slice(0, 2000)}`)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  } finally {
    child.kill("SIGKILL")
    await exited
  }
}

const cairnRun = async () => {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-startup-"))
  try {
    // As `npm run start:prod`: NODE_OPTIONS emptied (no source condition), the embedded defaults.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_OPTIONS: "", CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir }
    return await timeToHealthy([entry], env, port, "/health")
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const baselineRun = async () => {
  const port = await freePort()
  const program = `require("node:http").createServer((q, s) => s.end("ok")).listen(${port}, "127.0.0.1")`
  return timeToHealthy(["-e", program], { PATH: process.env.PATH, NODE_OPTIONS: "" }, port, "/")
}

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const run = async (): Promise<void> => {
  if (process.env.BENCH_STARTUP_NO_BUILD !== "1") {
    execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-b", "tsconfig.build.json"], { cwd: root, stdio: "inherit" })
    execFileSync(process.execPath, [join(root, "scripts", "bundle.mjs")], { cwd: root, stdio: "inherit" })
  }
  // Warm the file system cache once (the first start reads every module from disk).
  await cairnRun()
  await baselineRun()
  const cairn: Array<{ readonly ms: number; readonly cpu: number }> = []
  const baseline: Array<{ readonly ms: number; readonly cpu: number }> = []
  for (let i = 0; i < RUNS; i++) {
    cairn.push(await cairnRun())
    baseline.push(await baselineRun())
  }
  const ms = median(cairn.map((r) => r.ms))
  const base = median(baseline.map((r) => r.ms))
  console.log(
    `startup: ms_to_healthy=${ms.toFixed(0)} (node_baseline_ms=${base.toFixed(0)}) ratio=${(ms / base).toFixed(1)} runs=${RUNS} ` +
      `min_ms=${Math.min(...cairn.map((r) => r.ms)).toFixed(0)} max_ms=${Math.max(...cairn.map((r) => r.ms)).toFixed(0)} ` +
      `cpu_ms=${median(cairn.map((r) => r.cpu)).toFixed(0)} node_baseline_cpu_ms=${median(baseline.map((r) => r.cpu)).toFixed(0)}`
  )
}

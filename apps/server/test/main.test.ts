// Boots the real entry point (`apps/server/src/main.ts`, what `npm start` runs) as a child
// process on a free port, calls /health, and checks both stop signals end it cleanly.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { describe, expect, it } from "@effect/vitest"
import { whenListening } from "./support/listening.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))

const start = async () => {
  const port = await freePort()
  const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/main.ts"], {
    cwd: root,
    env: { ...process.env, CAIRN_PORT: String(port), CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-main-")), CAIRN_STAGE: "test" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const { output } = await whenListening(child, "server")
  return { child, port, output }
}

const exitOf = (child: ChildProcess) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal }))
  )

describe("npm start", () => {
  it("serves /health without disclosing catalog or data, logs one URL line, stops on SIGTERM", async () => {
    const { child, port, output } = await start()
    try {
      const response = await fetch(`http://127.0.0.1:${port}/health`)
      expect(response.status).toBe(200)
      const text = await response.text()
      expect(JSON.parse(text)).toEqual({ status: "ok" })
      for (const secret of ["tracker", "Task", "Project", "catalog", "token"]) expect(text).not.toContain(secret)
      const lines = output().split("\n").filter((l) => l.includes("Cairn listening on"))
      expect(lines).toHaveLength(1)
      expect(lines[0]).toContain(`http://127.0.0.1:${port}`)
      const missing = await fetch(`http://127.0.0.1:${port}/db/../health/x`)
      expect(missing.status).toBe(404)
    } finally {
      const exited = exitOf(child)
      child.kill("SIGTERM")
      const { code, signal } = await exited
      expect(signal === null ? code : signal).toBe(0)
    }
  })

  it("serves the demo page at / and bundles its script on demand, from the sources as checked out", async () => {
    const { child, port } = await start()
    try {
      const page = await fetch(`http://127.0.0.1:${port}/`)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain('<script type="module" src="/demo.js"></script>')
      const script = await fetch(`http://127.0.0.1:${port}/demo.js`)
      expect(script.status).toBe(200)
      const code = await script.text()
      expect(code).toContain("cairn-demo")
      // The bundle is for browsers: no Node module reached it.
      for (const nodeOnly of ["better-sqlite3", "node:fs", "oidc-provider"]) expect(code).not.toContain(nodeOnly)
    } finally {
      const exited = exitOf(child)
      child.kill("SIGTERM")
      await exited
    }
  })

  it("stops cleanly on SIGINT (Ctrl-C)", async () => {
    const { child } = await start()
    const exited = exitOf(child)
    child.kill("SIGINT")
    const { code, signal } = await exited
    expect(signal === null ? code : signal).toBe(0)
  })
})

/** Runs `npm start` itself (npm, its shell, node) with `env`, collecting output until it exits or is told to stop. */
const npmStart = (env: Record<string, string>) => {
  const child = spawn("npm", ["start", "--silent"], { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => (stdout += d))
  child.stderr!.on("data", (d) => (stderr += d))
  return { child, stdout: () => stdout, stderr: () => stderr }
}

describe("startup", () => {
  it("lists every settings problem at once, without a stack trace, and exits 2", async () => {
    const run = npmStart({
      CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-main-")),
      CAIRN_PORT: "not-a-port",
      CAIRN_MAX_BODY_BYTES: "-1",
      CAIRN_QUERY_MAX_PAGE_SIZE: "many",
      CAIRN_CORS_ORIGINS: "https://app.example.com/path",
      CAIRN_LOG_FORMAT: "xml"
    })
    const { code } = await exitOf(run.child)
    expect(code).toBe(2)
    const err = run.stderr()
    expect(err).toContain("fix these 5 settings")
    for (const name of ["CAIRN_PORT", "CAIRN_MAX_BODY_BYTES", "CAIRN_QUERY_MAX_PAGE_SIZE", "CAIRN_CORS_ORIGINS", "CAIRN_LOG_FORMAT"]) {
      expect(err).toContain(name)
    }
    expect(err).not.toMatch(/\n\s+at /)
    expect(run.stdout()).not.toContain("Cairn listening")
  })

  it("SIGTERM to npm start stops the server and leaves no process or port behind", async () => {
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-main-"))
    const run = npmStart({ CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_STAGE: "test", CAIRN_LOG_FORMAT: "json" })
    for (let i = 0; i < 600 && !run.stdout().includes("Cairn listening on"); i++) await new Promise((r) => setTimeout(r, 50))
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200)
    // CAIRN_LOG_FORMAT=json: every line is one JSON object.
    for (const line of run.stdout().split("\n").filter((l) => l.trim() !== "")) expect(() => JSON.parse(line), line).not.toThrow()
    const exited = exitOf(run.child)
    run.child.kill("SIGTERM")
    await exited
    // Nothing answers on the port any more, and no process of this run is left.
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow()
    const { readdirSync, readFileSync } = await import("node:fs")
    const leftovers = readdirSync("/proc")
      .filter((pid) => /^\d+$/.test(pid))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, "utf8").includes(`CAIRN_DATA_DIR=${dataDir}`)
        } catch {
          return false
        }
      })
    expect(leftovers).toEqual([])
  })
})

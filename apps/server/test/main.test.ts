// Boots the real entry point (`apps/server/src/main.ts`, what `npm start` runs) as a child
// process on a free port, calls /health, and checks both stop signals end it cleanly.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { describe, expect, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))

const start = async () => {
  const port = await freePort()
  const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/main.ts"], {
    cwd: root,
    env: { ...process.env, CAIRN_PORT: String(port), CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-main-")), CAIRN_STAGE: "test" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes("Cairn listening on")) {
        clearInterval(timer)
        resolve()
      }
    }, 50)
    child.once("exit", (code) => {
      clearInterval(timer)
      reject(new Error(`server exited early (${code}):\n${output}`))
    })
  })
  return { child, port, output: () => output }
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

  it("stops cleanly on SIGINT (Ctrl-C)", async () => {
    const { child } = await start()
    const exited = exitOf(child)
    child.kill("SIGINT")
    const { code, signal } = await exited
    expect(signal === null ? code : signal).toBe(0)
  })
})

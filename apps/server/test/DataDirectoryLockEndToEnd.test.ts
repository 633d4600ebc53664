// One writer per file, across processes: `npm start`'s entry started twice on one data
// directory. The second exits non-zero at once naming the directory, the first keeps
// committing; once the first is SIGKILLed (the lock dies with it) a new process takes over
// and the acknowledged receipt replays. A start on a port already in use says so.
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { postCreateProject } from "./support/requests.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))

interface Server {
  readonly child: ChildProcess
  readonly port: number
  readonly issuer: string
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

const launch = async (dataDir: string, onPort?: number): Promise<Server> => {
  const port = onPort ?? (await freePort())
  const issuer = `http://127.0.0.1:${await freePort()}`
  const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/main.ts"], {
    cwd: root,
    env: { ...process.env, CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_STAGE: "test", CAIRN_DEV_ISSUER_URL: issuer },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal }))
  )
  return { child, port, issuer, output: () => output, exited }
}

/** Resolves once the server logs its URL; rejects if it exits first. */
const listening = (server: Server) =>
  new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (server.output().includes("Cairn listening on")) {
        clearInterval(timer)
        resolve()
      }
    }, 50)
    void server.exited.then(({ code }) => {
      clearInterval(timer)
      reject(new Error(`server exited early (${code}):\n${server.output()}`))
    })
  })

/** A development token for `server`, as `npm run -s token` mints it from the data directory's key. */
const token = (server: Server, dataDir: string, org: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const base = `http://127.0.0.1:${server.port}`
      const dev = yield* devIssuer.pipe(
        Effect.provideService(Settings, onLoopback({ port: server.port, dataDir })),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", server.issuer]]))),
        Effect.orDie
      )
      return yield* signDevToken(dev, { subject: "alice", audience: `${base}/db`, claims: { org }, scope: accessScopes.join(" "), ttlSeconds: 600 })
    })
  )

const createProject = (server: Server, bearer: string, invocationId: string) => postCreateProject(`http://127.0.0.1:${server.port}`, bearer, invocationId)

describe("one Cairn process per data directory", () => {
  it("a second process exits non-zero at once naming the directory; the first keeps committing; after SIGKILL a new one takes over", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-lock-"))
    const first = await launch(dataDir)
    const started: Array<Server> = [first]
    try {
      await listening(first)
      const bearer = await token(first, dataDir, "acme")
      const invocationId = uuidv7()
      const receipt = await createProject(first, bearer, invocationId)
      expect(receipt.outcome).toBe("committed")

      const second = await launch(dataDir)
      started.push(second)
      const before = Date.now()
      const { code } = await second.exited
      expect(code, second.output()).not.toBe(0)
      expect(second.output()).toContain(`another Cairn process is using ${dataDir}`)
      expect(second.output()).not.toContain("Cairn listening on")
      // Fails at startup, not after a busy wait (process start and module loading included).
      expect(Date.now() - before).toBeLessThan(15_000)

      // The first one's writer is untouched.
      expect((await createProject(first, bearer, uuidv7())).outcome).toBe("committed")
      expect(await createProject(first, bearer, invocationId)).toEqual(receipt)

      // The lock is the process's: SIGKILL releases it, and a new process serves the same data.
      first.child.kill("SIGKILL")
      expect((await first.exited).signal).toBe("SIGKILL")
      const third = await launch(dataDir)
      started.push(third)
      await listening(third)
      const again = await token(third, dataDir, "acme")
      expect(await createProject(third, again, invocationId)).toEqual(receipt)
      expect((await createProject(third, again, uuidv7())).outcome).toBe("committed")
    } finally {
      for (const server of started) if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL")
    }
  }, 90_000)

  it("a start on a port already in use exits non-zero naming the reason (it said only \"Cairn cannot start: \")", async () => {
    const holder = createServer()
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve))
    const port = (holder.address() as { port: number }).port
    try {
      const refused = await launch(mkdtempSync(join(tmpdir(), "cairn-port-")), port)
      const { code } = await refused.exited
      expect(code, refused.output()).not.toBe(0)
      expect(refused.output()).toContain(`Cairn cannot start: listen EADDRINUSE: address already in use 127.0.0.1:${port}`)
      expect(refused.output()).not.toContain("Cairn listening on")
    } finally {
      await new Promise((resolve) => holder.close(resolve))
    }
  }, 60_000)
})

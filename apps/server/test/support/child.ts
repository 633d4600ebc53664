// A Cairn server as a real child process (`node --import tsx <entry>`) on free ports, with
// development tokens minted from its data directory's key, as `npm run -s token` does.
import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { ConfigProvider, Effect } from "effect"
import { whenListening } from "./listening.js"


const root = fileURLToPath(new URL("../../../..", import.meta.url))

/**
 * Servers still running: killed when this process exits however it exits (a failed test file, a
 * crashed benchmark), so none outlives it writing into a pipe nobody reads.
 */
const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

export interface Child {
  readonly child: ChildProcess
  readonly base: string
  readonly port: number
  readonly issuer: string
  readonly dataDir: string
  readonly output: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts `entry` (relative to the repository) on `dataDir`; resolves once it listens. */
export const launchChild = async (
  entry: string,
  dataDir: string,
  env: Readonly<Record<string, string>> = {},
  reuse?: Pick<Child, "port" | "issuer">,
  nodeArgs: ReadonlyArray<string> = []
): Promise<Child> => {
  const port = reuse?.port ?? (await freePort())
  const issuer = reuse?.issuer ?? `http://127.0.0.1:${await freePort()}`
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", entry], {
    cwd: root,
    env: { ...process.env, CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_STAGE: "test", CAIRN_DEV_ISSUER_URL: issuer, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      running.delete(child)
      resolve({ code, signal })
    })
  )
  const { output } = await whenListening(child)
  return { child, base: `http://127.0.0.1:${port}`, port, issuer, dataDir, output, exited }
}

/** Kills the child if it still runs, and waits for it. */
export const stopChild = async (server: Child, signal: NodeJS.Signals = "SIGKILL") => {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill(signal)
  return server.exited
}

/** A development token for `server`. */
export const childToken = (server: Child, who: { readonly sub: string; readonly org: string; readonly roles?: ReadonlyArray<string> }) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const dev = yield* devIssuer.pipe(
        Effect.provideService(Settings, onLoopback({ port: server.port, dataDir: server.dataDir })),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", server.issuer]]))),
        Effect.orDie
      )
      return yield* signDevToken(dev, {
        subject: who.sub,
        audience: `${server.base}/db`,
        claims: { org: who.org, ...(who.roles ? { roles: who.roles } : {}) },
        scope: accessScopes.join(" "),
        ttlSeconds: 3600
      })
    })
  )

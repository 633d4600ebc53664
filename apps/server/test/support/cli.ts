// The operator CLI as real processes (node with the tsx loader, as `npm run cairn` runs it),
// for end-to-end tests over applications written to temporary directories.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { whenListening } from "./listening.js"

export const root = fileURLToPath(new URL("../../../..", import.meta.url))

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CAIRN_") && k !== "INIT_CWD"))

/** `cairn <args>` to completion; the environment is the test's minus any `CAIRN_*`, plus `env`. */
export const cairn = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<Ran>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/cli.ts", ...args], { cwd: root, env: { ...cleanEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("exit", (code) => resolve({ code, stdout, stderr }))
  })

const children: Array<ChildProcess> = []
/** Kills every server still running (call from `afterAll`). */
export const killAll = () => {
  for (const child of children) child.kill("SIGKILL")
}

/** `cairn serve --app <app>` until it logs its URL. */
export const serve = async (app: string, env: Record<string, string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/cli.ts", "serve", "--app", app], { cwd: root, env: { ...cleanEnv(), ...env }, stdio: ["ignore", "pipe", "pipe"] })
  children.push(child)
  const { output } = await whenListening(child, "cairn serve")
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code, signal) => resolve(code ?? (signal === "SIGKILL" ? -9 : null))))
  return {
    output,
    kill: () => {
      child.kill("SIGKILL")
      return exited
    },
    stop: () => {
      child.kill("SIGTERM")
      return exited
    }
  }
}

/** One RPC on `/db/rpc`; answers its exit (`Success` with `value`, or `Failure` with `cause`). */
export const rpc = async (base: string, token: string, tag: string, payload: unknown) => {
  const response = await fetch(`${base}/db/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ _tag: "Request", id: "1", tag, headers: [], payload })
  })
  const body = (await response.json()) as ReadonlyArray<{ readonly exit: { readonly _tag: string; readonly value?: any; readonly cause?: any } }>
  return body[0]!.exit
}

/** A directory outside the workspace whose modules resolve `@cairn/*` and `effect` from it. */
export const appDirectory = () => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-evolution-app-"))
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir")
  return dir
}

/**
 * One sync RPC on `/db/sync` (NDJSON) read to its end: the values of a stream (`SyncChanges`
 * with `live: false`), or the one success value (`SyncSnapshot`), or the failure's exit.
 */
export const syncCall = async (base: string, token: string, tag: "SyncSnapshot" | "SyncChanges", payload: unknown) => {
  const response = await fetch(`${base}/db/sync`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
    body: `${JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })}\n`
  })
  const lines = (await response.text()).split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l))
  const values: Array<any> = []
  let exit: any
  for (const line of lines) {
    if (line._tag === "Chunk") values.push(...line.values)
    if (line._tag === "Exit") exit = line.exit
  }
  if (exit?._tag === "Success" && exit.value !== undefined && exit.value !== null) values.push(exit.value)
  return { values, exit }
}

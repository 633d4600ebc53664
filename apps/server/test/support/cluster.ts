// Cairn as a cluster on loopback, for end-to-end tests and the cluster benchmark: a PostgreSQL it
// starts, runner / front / replica processes of the real entry point (`apps/server/src/main.ts` with
// CAIRN_ROLE), one shared object store (a directory, or the S3-compatible server the caller started),
// one issuer every process trusts (a shared HMAC key) and one public base URL, as behind a load
// balancer. Calls go to any process with the public `Host`.
import { mkdtempSync, rmSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Postgres, startPostgres } from "@cairn/testkit/Postgres"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { SignJWT } from "jose"
import { type Child, launchChild, stopChild } from "./child.js"

export const issuer = "https://issuer.cluster.test"
const tokenSecret = "cluster-test-token-secret-0123456789abcdef"

let uuidCounter = 0
/** A fresh UUIDv7-shaped invocation id. */
export const invocationId = () => {
  const n = (Date.now() * 1000 + uuidCounter++).toString(16).padStart(12, "0").slice(-12)
  const r = Math.floor(Math.random() * 0xfff).toString(16).padStart(3, "0")
  return `${n.slice(0, 8)}-${n.slice(8, 12)}-7${r}-8000-${Math.floor(Math.random() * 2 ** 48).toString(16).padStart(12, "0")}`
}

export interface Answer {
  readonly status: number
  readonly requestId: string
  readonly text: string
  readonly json: any
}

/**
 * One `/db/rpc` (or `/db/sync`) call to `server`, addressed as the deployment's public `host`, as a
 * load balancer forwards it: every process serves the deployment's one public name.
 */
export const rpc = (server: Pick<Child, "port">, publicHost: string, token: string, tag: string, payload: unknown, path = "/db/rpc"): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] }) + (path === "/db/rpc" ? "" : "\n")
    const request = httpRequest(
      {
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path,
        headers: { host: publicHost, "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${token}` }
      },
      (response) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (chunk) => (text += chunk))
        response.on("error", reject)
        response.on("end", () => {
          let json: unknown
          try {
            // `/db/rpc` answers one JSON document, `/db/sync` NDJSON lines.
            json = path === "/db/rpc" ? JSON.parse(text) : text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
          } catch {
            json = undefined
          }
          resolve({ status: response.statusCode ?? 0, requestId: String(response.headers["x-request-id"] ?? ""), text, json })
        })
      }
    )
    request.on("error", reject)
    request.end(body)
  })

/** The success value of an RPC answer, or undefined. */
export const successOf = (answer: Answer): any => {
  const exit = (Array.isArray(answer.json) ? answer.json : [answer.json]).find((m: any) => m?._tag === "Exit")?.exit
  return exit?._tag === "Success" ? exit.value : undefined
}

/** An answer as a caller compares it: status and body, this request's id taken out. */
export const comparable = (answer: Answer) => ({ status: answer.status, body: answer.text.replaceAll(answer.requestId, "<request-id>") })

export const waitFor = async <A>(what: string, f: () => A | undefined | Promise<A | undefined>, timeoutMs = 5_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await f()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export type ClusterRole = "runner" | "front" | "replica"

export interface ClusterProcess {
  readonly role: ClusterRole
  readonly name: string
  child: Child
}

export interface ClusterOptions {
  /** Extra settings for every process (e.g. an S3 store's `CAIRN_OBJECT_STORE=s3` and `CAIRN_S3_*`; default: one shared directory). */
  readonly env?: Readonly<Record<string, string>>
  /** Node flags for the processes (e.g. module recording). */
  readonly nodeArgs?: (name: string) => ReadonlyArray<string>
}

export interface Cluster {
  readonly pg: Postgres
  /** The deployment's public base URL and `host:port` (a port nothing listens on: every process answers to it). */
  readonly base: string
  readonly publicHost: string
  /** The settings every process of the cluster shares. */
  readonly env: Readonly<Record<string, string>>
  readonly processes: Array<ClusterProcess>
  /** Starts one more process of `role` (its own data directory). */
  readonly start: (role: ClusterRole, name?: string, extra?: Readonly<Record<string, string>>) => Promise<ClusterProcess>
  /** SIGKILLs a process; `wipe` also deletes its data directory (its disk is lost with it). */
  readonly kill: (process: ClusterProcess, options?: { readonly wipe?: boolean }) => Promise<void>
  /** An access token of subject `sub` for database `org`. */
  readonly token: (org: string, options?: { readonly scope?: string; readonly sub?: string }) => Promise<string>
  readonly rpc: (server: ClusterProcess | Pick<Child, "port">, token: string, tag: string, payload: unknown, path?: string) => Promise<Answer>
  /** Stops every process (SIGTERM) and PostgreSQL. */
  readonly stop: () => Promise<void>
}

/** Starts PostgreSQL and an empty cluster (no process yet): add them with `start`. */
export const startCluster = async (options: ClusterOptions = {}): Promise<Cluster> => {
  const pg = await startPostgres()
  const publicPort = await freePort()
  const base = `http://127.0.0.1:${publicPort}`
  const publicHost = `127.0.0.1:${publicPort}`
  const env: Record<string, string> = {
    CAIRN_ISSUER: issuer,
    CAIRN_TOKEN_SECRET: tokenSecret,
    CAIRN_TOKEN_ALGORITHMS: "HS256",
    CAIRN_BASE_URL: base,
    CAIRN_SECRET: "cluster-test-deployment-secret-0123456789",
    CAIRN_LOG_FORMAT: "json",
    CAIRN_SQLITE_SYNCHRONOUS: "NORMAL",
    CAIRN_CLUSTER_DATABASE_URL: pg.createDatabase("cairn_cluster"),
    CAIRN_CLUSTER_SHARDS: "16",
    CAIRN_CLUSTER_LOCK_EXPIRATION: "3 seconds",
    CAIRN_CLUSTER_REFRESH_INTERVAL: "500 millis",
    CAIRN_CLUSTER_HEALTH_INTERVAL: "1 second",
    CAIRN_CLUSTER_SEND_TIMEOUT: "8 seconds",
    ...(options.env?.["CAIRN_OBJECT_STORE"] === "s3" ? {} : { CAIRN_OBJECT_DIR: mkdtempSync(join(tmpdir(), "cairn-cluster-objects-")) }),
    ...options.env
  }
  const processes: Array<ClusterProcess> = []
  const dirs = new Map<ClusterProcess, string>()
  const start = async (role: ClusterRole, name = `${role}-${processes.length}`, extra: Readonly<Record<string, string>> = {}) => {
    const dataDir = mkdtempSync(join(tmpdir(), `cairn-cluster-${name}-`))
    const child = await launchChild(
      "apps/server/src/main.ts",
      dataDir,
      { ...env, CAIRN_ROLE: role, ...(role === "runner" ? { CAIRN_RUNNER_PORT: String(await freePort()) } : {}), ...extra },
      undefined,
      options.nodeArgs?.(name) ?? []
    )
    const process: ClusterProcess = { role, name, child }
    processes.push(process)
    dirs.set(process, dataDir)
    return process
  }
  const kill = async (process: ClusterProcess, killOptions: { readonly wipe?: boolean } = {}) => {
    await stopChild(process.child, "SIGKILL")
    if (killOptions.wipe) rmSync(dirs.get(process)!, { recursive: true, force: true })
  }
  const token = (org: string, tokenOptions: { readonly scope?: string; readonly sub?: string } = {}) =>
    new SignJWT({ org, scope: tokenOptions.scope ?? "cairn:read cairn:write", roles: ["admin"] })
      .setProtectedHeader({ alg: "HS256", typ: "at+jwt" })
      .setIssuer(issuer)
      .setSubject(tokenOptions.sub ?? "alice")
      .setAudience(`${base}/db`)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(tokenSecret))
  return {
    pg,
    base,
    publicHost,
    env,
    processes,
    start,
    kill,
    token,
    rpc: (server, t, tag, payload, path) => rpc("child" in server ? server.child : server, publicHost, t, tag, payload, path),
    stop: async () => {
      await Promise.all(processes.map((p) => stopChild(p.child, "SIGTERM")))
      pg.stop()
    }
  }
}

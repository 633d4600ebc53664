/**
 * `npm run bench -- observability`: the cost of trace export on the query path. The real App
 * (`App(trackerDeployment)`) serves `/db/rpc` Query calls over loopback HTTP twice in the same
 * run — without an OTLP endpoint (spans stay in memory) and with one (every span exported to
 * an in-process OTLP/HTTP receiver) — alternating rounds to share the machine's noise. Prints
 * `observability: overhead_ratio=<traced qps / untraced qps> traced_qps=.. untraced_qps=..`
 * (target ≥ 0.9).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, Scope, Exit } from "effect"
import { v7 as uuidv7 } from "uuid"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { freePort } from "@cairn/testkit/freePort"
import { trackerDeployment } from "@cairn/tracker/application"
import { App } from "../../apps/server/src/App.js"

const QUERIES = 600
const CONCURRENCY = 8
const ROUNDS = 3

/** An OTLP/HTTP receiver that accepts and discards every export. */
const sink = async () => {
  const port = await Effect.runPromise(freePort())
  // Only counts bytes: a real collector runs in another process, so parsing here would bill the server for it.
  let bytes = 0
  const server = createServer((request, response) => {
    request.on("data", (chunk: Buffer) => (bytes += chunk.length)).on("end", () => {
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return { endpoint: `http://127.0.0.1:${port}`, bytes: () => bytes, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** Starts the App; returns its base URL, a bearer token and a stop function. */
const start = async (env: Record<string, string>) => {
  const port = await Effect.runPromise(freePort())
  const issuer = `http://127.0.0.1:${await Effect.runPromise(freePort())}`
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-observe-"))
  const base = `http://127.0.0.1:${port}`
  const settings = onLoopback({ port, dataDir })
  const config = ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", issuer], ["CAIRN_SQLITE_SYNCHRONOUS", "NORMAL"], ...Object.entries(env)]))
  const scope = await Effect.runPromise(Scope.make())
  await Effect.runPromise(
    Layer.buildWithScope(
      App(trackerDeployment).pipe(
        Layer.provide(Settings.layer(settings)),
        Layer.provide(Layer.setConfigProvider(config)),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
      ),
      scope
    )
  )
  const dev = await Effect.runPromise(devIssuer.pipe(Effect.provideService(Settings, settings), Effect.withConfigProvider(config), Effect.orDie))
  const token = await Effect.runPromise(
    signDevToken(dev, { subject: "bench", audience: `${base}/db`, claims: { org: "bench" }, scope: accessScopes.join(" "), ttlSeconds: 3600 })
  )
  return {
    base,
    token,
    stop: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

const call = (base: string, token: string, tag: string, payload: unknown) =>
  fetch(`${base}/db/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })
  }).then((r) => r.text())

const query = {
  query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } }, page: { first: 20 } }
}

/** Queries per second for `QUERIES` calls at `CONCURRENCY`. */
const measure = async (base: string, token: string) => {
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < QUERIES) {
        next++
        await call(base, token, "Query", query)
      }
    })
  )
  return QUERIES / ((performance.now() - started) / 1000)
}

export const run = async () => {
  const receiver = await sink()
  const plain = await start({})
  const traced = await start({ CAIRN_OTLP_ENDPOINT: receiver.endpoint })
  try {
    for (const app of [plain, traced]) {
      for (let i = 0; i < 20; i++) {
        await call(app.base, app.token, "Mutate", {
          operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
          input: { name: `Project ${i}` },
          invocationId: uuidv7()
        })
      }
      await measure(app.base, app.token) // warm-up
    }
    let untraced = 0
    let tracedQps = 0
    for (let round = 0; round < ROUNDS; round++) {
      untraced = Math.max(untraced, await measure(plain.base, plain.token))
      tracedQps = Math.max(tracedQps, await measure(traced.base, traced.token))
    }
    // Let the exporter flush once, to report that spans did leave the process.
    await new Promise((r) => setTimeout(r, 1500))
    console.log(
      `observability: overhead_ratio=${(tracedQps / untraced).toFixed(3)} traced_qps=${tracedQps.toFixed(0)} untraced_qps=${untraced.toFixed(0)} exported_bytes=${receiver.bytes()}`
    )
  } finally {
    await plain.stop()
    await traced.stop()
    await receiver.close()
  }
}

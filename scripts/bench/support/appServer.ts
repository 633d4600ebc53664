/**
 * Benchmark child: the real `App(trackerDeployment)` as `npm start` assembles it, on a free
 * loopback port with a fresh data directory and `synchronous=FULL`. Prints one JSON line
 * `{ base, db, mcp }` (the base URL and development tokens for `/db` and `/mcp`), then answers
 * each `stats` line on stdin with `{ cpuUs, groups, groupedWrites }`: its own CPU time (user +
 * system) and the writer's group commits so far (one transaction, so one WAL fsync, each).
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, Metric } from "effect"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { Writer } from "@cairn/store"
import { freePort } from "@cairn/testkit/freePort"
import { trackerDeployment } from "@cairn/tracker/application"
import { App } from "../../../apps/server/src/App.js"

const main = Effect.gen(function* () {
  const port = yield* freePort()
  const base = `http://127.0.0.1:${port}`
  const issuer = `http://127.0.0.1:${yield* freePort()}`
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-http-"))
  const settings = onLoopback({ port, dataDir, stage: "development" })
  const env = ConfigProvider.fromMap(
    new Map([
      ["CAIRN_DEV_ISSUER_URL", issuer],
      ["CAIRN_SQLITE_SYNCHRONOUS", "FULL"]
    ])
  )
  yield* Layer.build(
    App(trackerDeployment).pipe(
      Layer.provide(Settings.layer(settings)),
      Layer.provide(Layer.setConfigProvider(env)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings), Effect.withConfigProvider(env), Effect.orDie)
  const token = (resource: "db" | "mcp") =>
    signDevToken(dev, {
      subject: "bench",
      audience: `${base}/${resource}`,
      claims: { org: "bench", roles: ["admin"] },
      scope: accessScopes.join(" "),
      ttlSeconds: 3600
    })
  process.stdout.write(JSON.stringify({ base, db: yield* token("db"), mcp: yield* token("mcp") }) + "\n")
  const lines = createInterface({ input: process.stdin })
  lines.on("line", () => {
    const cpu = process.cpuUsage()
    const groups = Effect.runSync(Metric.value(Writer.groupSize))
    process.stdout.write(JSON.stringify({ cpuUs: cpu.user + cpu.system, groups: groups.count, groupedWrites: groups.sum }) + "\n")
  })
  lines.on("close", () => process.exit(0))
  return yield* Effect.never
})

Effect.runPromise(Effect.scoped(main)).catch((error) => {
  console.error(error)
  process.exit(1)
})

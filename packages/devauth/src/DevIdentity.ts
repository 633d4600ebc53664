/**
 * The development issuer as the server's `FallbackIssuer`: trusted when no external
 * issuer is configured, in development and test stages only (it refuses otherwise), and
 * advertised to MCP clients as their authorization server. While trusted, it leaves its issuer
 * and the server's base URL in the data directory (`DevToken.issuerRecordPath`) for `cairn token`.
 */
import { renameSync, rmSync, writeFileSync } from "node:fs"
import { FallbackIssuer } from "@cairn/server/auth/FallbackIssuer"
import { IdentityConfigError } from "@cairn/server/auth/IdentityLive"
import { Settings } from "@cairn/server/operations/Settings"
import { Effect, Layer, Scope } from "effect"
import { devIssuer, devIssuerUrl, devKeyPath } from "./DevIssuer.js"
import { isAlive, type IssuerRecord, issuerRecordPath, readIssuerRecord } from "./DevToken.js"

/**
 * Written to a temp name and renamed, so `cairn token` never reads half a record. A record of
 * another live process is left alone: that process holds the data directory, and this one is
 * about to be refused its lock (`DataDirectoryLocked`).
 */
const writeRecord = (dataDir: string, record: IssuerRecord) =>
  Effect.try({
    try: () => {
      const current = readIssuerRecord(dataDir)
      if (typeof current === "object" && current.pid !== process.pid && isAlive(current.pid)) return
      const file = issuerRecordPath(dataDir)
      const temporary = `${file}.${process.pid}.tmp`
      writeFileSync(temporary, JSON.stringify(record, null, 2) + "\n", { mode: 0o600 })
      renameSync(temporary, file)
    },
    catch: (error) =>
      new IdentityConfigError({
        message: `Cannot write the development issuer record ${issuerRecordPath(dataDir)}: ${error instanceof Error ? error.message : String(error)}`
      })
  })

/** Removed when the server stops, unless another process has written its own since. */
const removeRecord = (dataDir: string) =>
  Effect.sync(() => {
    const current = readIssuerRecord(dataDir)
    if (typeof current === "object" && current.pid === process.pid) rmSync(issuerRecordPath(dataDir), { force: true })
  })

export const DevFallbackIssuer = Layer.scoped(
  FallbackIssuer,
  Effect.gen(function* () {
    const settings = yield* Settings
    const context = yield* Effect.context<Settings>()
    const scope = yield* Effect.scope
    const trusted = devIssuer.pipe(
      Effect.tap((dev) =>
        Effect.logDebug(
          `Trusting the development issuer ${dev.issuer} (key in ${devKeyPath(settings.dataDir)}); mint a token with: npm run -s token -- --sub alice --org acme`
        )
      ),
      Effect.tap((dev) =>
        Effect.zipRight(
          writeRecord(settings.dataDir, { issuer: dev.issuer, baseUrl: settings.baseUrl, pid: process.pid, startedAt: new Date().toISOString() }),
          Scope.addFinalizer(scope, removeRecord(settings.dataDir))
        )
      ),
      Effect.map((dev) => ({ issuer: dev.issuer, keys: { _tag: "Jwks" as const, keys: [dev.key.publicJwk] }, algorithms: ["ES256"] })),
      Effect.mapError((error) => (error._tag === "IdentityConfigError" ? error : new IdentityConfigError({ message: error.message }))),
      Effect.provide(context)
    )
    return { trusted, url: Effect.provide(devIssuerUrl, context).pipe(Effect.orDie) }
  })
)

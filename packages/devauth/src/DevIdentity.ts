/**
 * The development issuer as the server's `FallbackIssuer`: trusted when no external
 * issuer is configured, in development and test stages only (it refuses otherwise), and
 * advertised to MCP clients as their authorization server.
 */
import { FallbackIssuer } from "@cairn/server/FallbackIssuer"
import { IdentityConfigError } from "@cairn/server/IdentityLive"
import { Settings } from "@cairn/server/Settings"
import { Effect, Layer } from "effect"
import { devIssuer, devIssuerUrl, devKeyPath } from "./DevIssuer.js"

export const DevFallbackIssuer = Layer.effect(
  FallbackIssuer,
  Effect.gen(function* () {
    const settings = yield* Settings
    const context = yield* Effect.context<Settings>()
    const trusted = devIssuer.pipe(
      Effect.tap((dev) =>
        Effect.logDebug(
          `Trusting the development issuer ${dev.issuer} (key in ${devKeyPath(settings.dataDir)}); mint a token with: npm run -s token -- --sub alice --org acme`
        )
      ),
      Effect.map((dev) => ({ issuer: dev.issuer, keys: { _tag: "Jwks" as const, keys: [dev.key.publicJwk] }, algorithms: ["ES256"] })),
      Effect.mapError((error) => new IdentityConfigError({ message: error.message })),
      Effect.provide(context)
    )
    return { trusted, url: Effect.provide(devIssuerUrl, context).pipe(Effect.orDie) }
  })
)

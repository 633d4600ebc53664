/**
 * Whom to trust when the operator configured no issuer (`CAIRN_ISSUER` unset). A required
 * service, so the choice is explicit in every assembly: a production build provides
 * `FallbackIssuer.none` (no external issuer, no start), a development build the development
 * issuer of `@cairn/devauth`, whose key and authorization server never ship in this package.
 */
import { Config, Context, Effect, Layer, Option } from "effect"
import type { IdentityConfigError, TrustedIssuer } from "./IdentityLive.js"

/** The setting naming the operator's external issuer. */
export const issuerSetting = "CAIRN_ISSUER"

/**
 * The external issuer the operator configured (`CAIRN_ISSUER`, trimmed), or none when it is
 * unset or blank: then the `FallbackIssuer` decides. Every reader (identity, the exposure
 * guard, MCP discovery, the development authorization server, the demo page) reads it
 * through this value, so they cannot disagree on whether one is configured.
 */
export const externalIssuer: Config.Config<Option.Option<string>> = Config.option(Config.string(issuerSetting)).pipe(
  Config.map(Option.flatMap((raw) => Option.liftPredicate(raw.trim(), (issuer) => issuer !== "")))
)

export interface FallbackIssuerShape {
  /** The issuer to trust instead, or why there is none (the server then does not start). */
  readonly trusted: Effect.Effect<TrustedIssuer, IdentityConfigError>
  /** Its identifier, advertised as an authorization server (MCP discovery). */
  readonly url: Effect.Effect<string, IdentityConfigError>
}

export class FallbackIssuer extends Context.Tag("@cairn/server/FallbackIssuer")<FallbackIssuer, FallbackIssuerShape>() {
  /** No fallback: an external issuer must be configured. */
  static readonly none = (refusal: IdentityConfigError) =>
    Layer.succeed(FallbackIssuer, { trusted: Effect.fail(refusal), url: Effect.fail(refusal) })
}

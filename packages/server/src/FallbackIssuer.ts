/**
 * Whom to trust when the operator configured no issuer (`CAIRN_ISSUER` unset). A required
 * service, so the choice is explicit in every assembly: a production build provides
 * `FallbackIssuer.none` (no external issuer, no start), a development build the development
 * issuer of `@cairn/devauth`, whose key and authorization server never ship in this package.
 */
import { Context, Effect, Layer } from "effect"
import type { IdentityConfigError, TrustedIssuer } from "./IdentityLive.js"

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

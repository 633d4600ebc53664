/**
 * The one bearer gate in front of every authenticated route (`/db/*` and `/mcp`): one
 * token parser, one `WWW-Authenticate` writer, one Host/Origin rule, the audience chosen
 * by the resource. It also words the engine's refusals for HTTP (403 insufficient scope,
 * 503 overloaded or unavailable), so every transport answers them identically.
 */
import { type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { accessScopes } from "@cairn/domain/AccessScope"
import { type Principal } from "@cairn/domain/Principal"
import { Effect } from "effect"
import { Correlation } from "../engine/Correlation.js"
import { corsHeaders, corsOriginsConfig, type CorsRoute, preflightHeaders } from "./CorsOrigins.js"
import { Identity, type Resource } from "../auth/Identity.js"
import { frontError } from "../internal/frontError.js"
import { foreignOrigin } from "../auth/Loopback.js"
import { httpStatusOf, type Refusal } from "../engine/Refusal.js"
import { Settings } from "../operations/Settings.js"

/** The RFC 9728 metadata document of a resource, where it has one. */
export const resourceMetadataUrl = (baseUrl: string, resource: Resource): string | undefined =>
  resource === "mcp" ? `${baseUrl}/.well-known/oauth-protected-resource/mcp` : undefined

export interface Challenge {
  readonly error?: "invalid_request" | "invalid_token" | "insufficient_scope"
  readonly description?: string
  readonly scope?: ReadonlyArray<string>
  readonly resourceMetadata?: string
}

/** RFC 6750 allows only printable ASCII without `"` and `\` in quoted values. */
const quoted = (text: string) => `"${text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, "?")}"`

/** A `Bearer` challenge (RFC 6750 §3), with the metadata URL of RFC 9728 §5.1 when there is one. */
export const challenge = (options: Challenge): string => {
  const params = [`realm="cairn"`]
  if (options.error) params.push(`error=${quoted(options.error)}`)
  if (options.description) params.push(`error_description=${quoted(options.description)}`)
  if (options.scope && options.scope.length > 0) params.push(`scope=${quoted(options.scope.join(" "))}`)
  if (options.resourceMetadata) params.push(`resource_metadata=${quoted(options.resourceMetadata)}`)
  return `Bearer ${params.join(", ")}`
}

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 §2.1 syntax), if it is one. */
export const bearerToken = (authorization: string): string | undefined =>
  /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization)?.[1]

/** `Retry-After` of an unavailable database when the engine names no better time. */
const unavailableRetryAfterSeconds = 5

export class BearerGate extends Effect.Service<BearerGate>()("@cairn/server/BearerGate", {
  effect: Effect.gen(function* () {
    const identity = yield* Identity
    const { baseUrl } = yield* Settings
    const corsOrigins = yield* corsOriginsConfig

    const oauth = (
      resource: Resource,
      status: number,
      error: "invalid_request" | "invalid_token" | "insufficient_scope",
      message: string,
      options: { readonly bare?: boolean; readonly scope?: ReadonlyArray<string> } = {}
    ) =>
      Effect.map(Correlation.id, (requestId) => {
        const resourceMetadata = resourceMetadataUrl(baseUrl, resource)
        // The metadata-bearing resource always advertises its scopes, so clients know what to ask for.
        const scope = options.scope ?? (resourceMetadata ? accessScopes : undefined)
        const header = challenge({
          ...(options.bare ? {} : { error, description: message }),
          ...(scope ? { scope } : {}),
          ...(resourceMetadata ? { resourceMetadata } : {})
        })
        return frontError(status, { error, message, error_description: message, requestId }, { "www-authenticate": header })
      })

    /**
     * The verified principal of a request for `resource`, or the answer refusing it: 401
     * with a challenge (no token, or a bad one), 400 for a token in the URL, 403 for a
     * foreign Host or Origin. Nothing about the route is revealed before the token verifies.
     */
    const authenticate = (
      request: HttpServerRequest.HttpServerRequest,
      resource: Resource
    ): Effect.Effect<Principal, HttpServerResponse.HttpServerResponse> =>
      Effect.gen(function* () {
        // The URL is parsed only when it has a query (most requests have none).
        if (request.url.includes("?") && new URL(request.url, baseUrl).searchParams.has("access_token")) {
          return yield* Effect.flip(
            oauth(resource, 400, "invalid_request", "Send the access token in the Authorization header, never in the URL.")
          )
        }
        const authorization = request.headers["authorization"]
        if (authorization === undefined) {
          return yield* Effect.flip(
            oauth(resource, 401, "invalid_token", "A bearer access token is required: send Authorization: Bearer <token>.", { bare: true })
          )
        }
        const token = bearerToken(authorization)
        if (token === undefined) {
          return yield* Effect.flip(oauth(resource, 401, "invalid_request", 'The Authorization header must be "Bearer <token>".'))
        }
        const principal = yield* identity
          .verify(token, resource)
          .pipe(Effect.catchAll((refused) => Effect.flip(oauth(resource, 401, refused.error, refused.description))))
        const origin = request.headers["origin"]
        // An origin on the operator's CORS allowlist is as good as our own.
        const foreign = foreignOrigin(baseUrl, {
          host: request.headers["host"],
          origin: origin !== undefined && corsOrigins.has(origin) ? undefined : origin
        })
        if (foreign !== undefined) {
          const requestId = yield* Correlation.id
          return yield* Effect.fail(frontError(403, { error: "forbidden", message: `Forbidden: ${foreign}`, requestId }))
        }
        return principal
      })

    /** The HTTP answer to an engine refusal, the same on every transport. */
    const refuse = (resource: Resource, principal: Principal, refusal: Refusal) =>
      Effect.gen(function* () {
        if (refusal._tag === "InsufficientScope") {
          // Step up: what the token already has plus what the call needs.
          const scope = accessScopes.filter((s) => s === refusal.scope || principal.scopes.includes(s))
          return yield* oauth(resource, 403, "insufficient_scope", refusal.message, { scope })
        }
        const requestId = yield* Correlation.id
        const { error, status } = httpStatusOf(refusal)
        if (refusal._tag === "Overloaded") {
          return frontError(
            status,
            {
              error,
              message: `${refusal.message} Nothing was applied; retry after ${refusal.retryAfterSeconds} s with the same invocationId.`,
              requestId,
              retryAfterSeconds: refusal.retryAfterSeconds
            },
            { "retry-after": String(refusal.retryAfterSeconds) }
          )
        }
        if (refusal._tag === "Unavailable") {
          // Retryable by definition: a client (or a proxy) is told when, on every way in.
          const retryAfterSeconds = refusal.retryAfterSeconds ?? unavailableRetryAfterSeconds
          return frontError(status, { error, message: refusal.message, requestId, retryAfterSeconds }, { "retry-after": String(retryAfterSeconds) })
        }
        return frontError(status, { error, message: refusal.message, requestId })
      })

    /** CORS headers for an answer to `request` (empty unless its Origin is on the allowlist). */
    const cors = (request: HttpServerRequest.HttpServerRequest) => corsHeaders(corsOrigins, request.headers["origin"])

    /**
     * The answer to an OPTIONS request for `route` when it is a browser's CORS preflight (it has an
     * Origin, and carries no token): 204 for an allowed origin, 403 (no CORS headers) for any other.
     * Without an Origin it is a client asking what the path takes: `undefined`, it is gated and routed.
     */
    const preflight = (request: HttpServerRequest.HttpServerRequest, route: CorsRoute) => {
      const origin = request.headers["origin"]
      if (origin === undefined) return Effect.succeed(undefined)
      return Effect.map(Correlation.id, (requestId) =>
        corsOrigins.has(origin)
          ? HttpServerResponse.empty({ status: 204, headers: preflightHeaders(origin, route) })
          : frontError(403, { error: "forbidden", message: "Requests from this Origin are not allowed (see CAIRN_CORS_ORIGINS).", requestId })
      )
    }

    return { authenticate, refuse, cors, preflight } as const
  })
}) {}

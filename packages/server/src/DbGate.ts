/**
 * The gate in front of every RPC route under `/db`: verifies the bearer token for the
 * `db` resource (real 401s with `WWW-Authenticate`), reads the body under the size limit
 * before the RPC layer (which would otherwise turn an oversized body into a defect),
 * and hands the verified principal to the handlers through the `Authentication` middleware.
 */
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Authentication, CurrentPrincipal } from "@cairn/domain"
import { Context, Effect, Layer, Option } from "effect"
import { Correlation, requestIdHeader } from "./Correlation.js"
import { Identity } from "./Identity.js"
import { frontError, payloadTooLarge } from "./internal/frontError.js"
import { Limits } from "./Limits.js"

/** Per-request state a handler hands back to the gate (RPC responses are always 200). */
export class Exchange extends Context.Tag("@cairn/server/DbGate/Exchange")<
  Exchange,
  { retryAfterSeconds: number | undefined; overloadMessage: string }
>() {}

/** RFC 6750 allows only printable ASCII without `"` and `\` in error_description. */
const quoted = (text: string) => `"${text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, "?")}"`

const challenge = (requestId: string, error: "invalid_request" | "invalid_token" | undefined, message: string) => {
  const params = [`realm="cairn"`, ...(error ? [`error=${quoted(error)}`, `error_description=${quoted(message)}`] : [])]
  return frontError(
    error === "invalid_request" ? 400 : 401,
    { error: error ?? "invalid_token", message, requestId },
    { "www-authenticate": `Bearer ${params.join(", ")}` }
  )
}

const bearerToken = (authorization: string): string | undefined =>
  /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization)?.[1]

const isTooLarge = (error: unknown) =>
  typeof error === "object" && error !== null && "cause" in error && error.cause instanceof Error && error.cause.message === "maxBytes exceeded"

/**
 * Authentication, body limit and overload mapping for every route under `/db`. A handler
 * that sets `Exchange.retryAfterSeconds` turns the whole answer into 503 + `Retry-After`.
 */
export const DbGate = HttpLayerRouter.middleware(
  Effect.gen(function* () {
    const identity = yield* Identity
    const limits = yield* Limits
    return (httpEffect) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const correlation = Option.getOrElse(yield* Effect.serviceOption(Correlation), Correlation.make)
        const requestId = correlation.id

        const authorization = request.headers["authorization"]
        if (authorization === undefined) {
          return challenge(requestId, undefined, "A bearer access token is required: send Authorization: Bearer <token>.")
        }
        const token = bearerToken(authorization)
        if (token === undefined) return challenge(requestId, "invalid_request", 'The Authorization header must be "Bearer <token>".')
        const verified = yield* Effect.either(identity.verify(token, "db"))
        if (verified._tag === "Left") return challenge(requestId, verified.left.error, verified.left.description)

        // Read (and cache on the request) the body under the limit before the RPC layer,
        // which would otherwise turn an oversized body into a defect.
        const body = yield* request.text.pipe(HttpServerRequest.withMaxBodySize(Option.some(limits.maxBodyBytes)), Effect.either)
        if (body._tag === "Left") {
          return isTooLarge(body.left)
            ? payloadTooLarge(requestId, limits.maxBodyBytes)
            : frontError(400, { error: "invalid_request", message: "The request body could not be read.", requestId })
        }
        if (Buffer.byteLength(body.right) > limits.maxBodyBytes) return payloadTooLarge(requestId, limits.maxBodyBytes)

        const exchange: Exchange["Type"] = { retryAfterSeconds: undefined, overloadMessage: "" }
        const response = yield* httpEffect.pipe(
          Effect.provideService(CurrentPrincipal, verified.right),
          Effect.provideService(Exchange, exchange),
          Effect.provideService(Correlation, correlation)
        )
        if (exchange.retryAfterSeconds !== undefined) {
          return frontError(
            503,
            {
              error: "overloaded",
              message: `${exchange.overloadMessage} Nothing was applied; retry after ${exchange.retryAfterSeconds} s with the same invocationId.`,
              requestId,
              retryAfterSeconds: exchange.retryAfterSeconds
            },
            { "retry-after": String(exchange.retryAfterSeconds) }
          )
        }
        return HttpServerResponse.setHeader(response, requestIdHeader, requestId)
      })
  })
)

/** Hands the gate's principal to the handlers; without one (a route mounted without its gate) nothing runs. */
export const DbAuthentication = Layer.succeed(
  Authentication,
  Authentication.of(() =>
    Effect.flatMap(
      Effect.serviceOption(CurrentPrincipal),
      Option.match({
        onNone: () => Effect.dieMessage("RPC request without a verified principal"),
        onSome: Effect.succeed
      })
    )
  )
)

/**
 * The answer for a path served under other methods: 405 with the `Allow` header RFC 9110 requires
 * (the caller learns what to send instead of "nothing is here"), and 204 with the same `Allow` for
 * an OPTIONS request that is not a browser's CORS preflight (the gates answer those).
 */
import { type HttpLayerRouter, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Correlation } from "../engine/Correlation.js"
import { frontError } from "../internal/frontError.js"

/** The methods a route is registered under (HEAD is served by a path's GET route). */
export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS"
/** Every method a route can be registered under. */
export const routable: ReadonlyArray<Method> = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

/** The `Allow` header of a path served under `allowed`: HEAD with GET, and OPTIONS always. */
export const allowOf = (allowed: ReadonlyArray<Method>): string =>
  [...allowed.filter((m) => m !== "OPTIONS"), ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"].join(", ")

/** 405 (204 for OPTIONS) for a request to a path served under `allowed` only. */
export const methodNotAllowed = (allowed: ReadonlyArray<Method>) => {
  const allow = allowOf(allowed)
  return (request: HttpServerRequest.HttpServerRequest): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
    request.method === "OPTIONS"
      ? Effect.succeed(HttpServerResponse.empty({ status: 204, headers: { allow } }))
      : Effect.map(Correlation.id, (requestId) =>
        frontError(405, { error: "method_not_allowed", message: `This path accepts ${allow}, not ${request.method}.`, requestId }, { allow })
      )
}

type Handler<E, R> = (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * Routes every method `path` is not served under to `methodNotAllowed(allowed)`, through `wrap`
 * (the path's gate, so that an anonymous caller still learns nothing but 401).
 */
export const refuseOtherMethods = <E = never, R = never>(
  router: HttpLayerRouter.HttpRouter,
  path: HttpLayerRouter.PathInput,
  allowed: ReadonlyArray<Method>,
  wrap: (answer: Handler<never, never>) => Handler<E, R> = (answer) => answer
) =>
  Effect.forEach(routable.filter((m) => !allowed.includes(m)), (method) => router.add(method, path, wrap(methodNotAllowed(allowed))), { discard: true })

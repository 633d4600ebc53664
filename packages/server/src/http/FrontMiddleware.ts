/**
 * The front's global middleware, around every route: assigns the correlation id, caps
 * request bodies and overall request time, turns failures into JSON refusals that carry
 * the id, records metrics and logs one line per request — method, route pattern,
 * status, duration and id; never tokens, query strings or payloads.
 */
import { FileSystem, HttpIncomingMessage, HttpLayerRouter, HttpTraceContext, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, Exit, type Fiber, FiberRef, FiberRefs, HashMap, Option, Tracer } from "effect"
import { currentElapsedMillis } from "@cairn/domain/Elapsed"
import { Correlation, requestIdHeader } from "../engine/Correlation.js"
import * as FrontMetrics from "../operations/FrontMetrics.js"
import { frontError, payloadTooLarge } from "../internal/frontError.js"
import { Limits } from "./Limits.js"

/** Label for requests no route matched: the raw path is caller text and is never logged. */
const unmatched = "(unmatched)"

const declaredLength = (request: HttpServerRequest.HttpServerRequest): number | undefined => {
  const raw = request.headers["content-length"]
  if (raw === undefined || !/^\d+$/.test(raw)) return undefined
  return Number(raw)
}

/** A JSON refusal for a failed or defective route, logging what the caller must not see. */
const fromCause = (cause: Cause.Cause<unknown>, requestId: string) =>
  Effect.gen(function* () {
    const [response, stripped] = yield* HttpServerError.causeResponse(cause)
    if (response.status >= 500 && !Cause.isInterruptedOnly(stripped)) {
      yield* Effect.logError("request failed inside the server", stripped).pipe(Effect.annotateLogs("requestId", requestId))
    }
    if (response.body._tag !== "Empty") return response
    switch (response.status) {
      case 404:
        return frontError(404, { error: "not_found", message: "No route serves this method and path.", requestId })
      case 400:
        return frontError(400, { error: "invalid_request", message: "The request could not be read.", requestId })
      default:
        return response.status >= 500
          ? frontError(response.status, {
              error: "internal_error",
              message: `The server failed while handling this request; it was logged as ${requestId}. Retry later, or report that reference.`,
              requestId
            })
          : response
    }
  })

/**
 * A fresh fiber's refs set in one update: `services` added to its context and the request id to
 * its log annotations (`provide` and `annotateLogs` would each set them on entry and again on exit).
 */
const seed = <S>(services: Context.Context<S>, requestId: string) =>
  Effect.updateFiberRefs((id, refs) =>
    FiberRefs.updateManyAs(refs, {
      entries: [
        [FiberRef.currentContext, [[id, Context.merge(FiberRefs.getOrDefault(refs, FiberRef.currentContext), services as Context.Context<never>)]]],
        [FiberRef.currentLogAnnotations, [[id, HashMap.set(FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations), "requestId", requestId)]]]
      ]
    })
  )

/**
 * `route` on a fiber of its own, seeded with `services` and the request id (`seed`): its exit,
 * or none once `millis` pass (the route is then interrupted without waiting for it, so the
 * deadline holds even while it is in an uninterruptible step; likewise when the caller hangs
 * up). One fiber and one timer per request, where `disconnect` plus `timeoutOption` fork three
 * fibers and a sleep.
 */
const withDeadline = <A, E, R, S>(
  route: Effect.Effect<A, E, R>,
  services: Context.Context<S>,
  requestId: string,
  millis: number
): Effect.Effect<Option.Option<Exit.Exit<A, E>>, never, Exclude<R, S>> =>
  Effect.fiberIdWith((self) =>
    // `seed` provides `S` to the route, as `Effect.provide` would.
    Effect.flatMap(Effect.forkDaemon(Effect.interruptible(Effect.zipRight(seed(services, requestId), route as Effect.Effect<A, E, Exclude<R, S>>))), (fiber: Fiber.RuntimeFiber<A, E>) =>
    Effect.interruptible(
      Effect.async<Option.Option<Exit.Exit<A, E>>>((resume) => {
        let done = false
        const settle = (outcome: Option.Option<Exit.Exit<A, E>>) => {
          if (done) return
          done = true
          clearTimeout(timer)
          if (Option.isNone(outcome)) fiber.unsafeInterruptAsFork(self)
          resume(Effect.succeed(outcome))
        }
        const timer = setTimeout(() => settle(Option.none()), millis)
        fiber.addObserver((exit) => settle(Option.some(exit)))
        return Effect.sync(() => {
          if (done) return
          done = true
          clearTimeout(timer)
          fiber.unsafeInterruptAsFork(self)
        })
      })
    )
  ))

export const FrontMiddleware = HttpLayerRouter.middleware(
  Effect.gen(function* () {
    const limits = yield* Limits
    const maxBodySize = Option.some(FileSystem.Size(limits.maxBodyBytes))

    return (httpEffect): Effect.Effect<HttpServerResponse.HttpServerResponse, HttpLayerRouter.unhandled, HttpServerRequest.HttpServerRequest> =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const correlation = Correlation.make()
        const requestId = correlation.id
        // Elapsed time, not the wall clock's (which may be set back or forward mid-request).
        const started = yield* currentElapsedMillis

        // Without the platform's span (no exporter), an upstream `traceparent` still names the trace logged.
        const upstream = Option.isNone(yield* Effect.serviceOption(Tracer.ParentSpan)) ? HttpTraceContext.fromHeaders(request.headers) : Option.none()
        const options = { kind: "server", captureStackTrace: false, ...(Option.isSome(upstream) ? { parent: upstream.value } : {}) } as const
        return yield* Effect.useSpan("http.front", options, (span) => {
          const route = () => {
            const matched = span.attributes.get("http.route")
            return typeof matched === "string" ? matched : unmatched
          }
          const finish = (status: number) =>
            Effect.gen(function* () {
              const millis = Math.round((yield* currentElapsedMillis) - started)
              yield* FrontMetrics.recordRequest(route(), status, millis)
              // One structured line per request: fields a JSON or logfmt logger prints as keys.
              const matched = route()
              yield* Effect.logInfo(`${request.method} ${matched} ${status} ${millis}ms`).pipe(
                Effect.annotateLogs({
                  requestId,
                  method: request.method,
                  route: matched,
                  status,
                  durationMs: millis,
                  traceId: span.traceId,
                  ...(correlation.invocationId !== undefined ? { invocationId: correlation.invocationId } : {}),
                  ...(correlation.outcome !== undefined ? { outcome: correlation.outcome } : {})
                })
              )
            })

          const answer = Effect.gen(function* () {
            const length = declaredLength(request)
            // An object upload streams to storage under the object limits (see `ObjectRoutes`), never into memory.
            const path = request.url.split("?")[0]!
            const streamed =
              (request.method === "POST" && path === "/db/objects") || (request.method === "PATCH" && path.startsWith("/db/objects/resumable/"))
            if (!streamed && length !== undefined && length > limits.maxBodyBytes) return payloadTooLarge(requestId, limits.maxBodyBytes)
            // The server runs middleware uninterruptibly; the route itself may be cut off.
            const outcome = yield* withDeadline(
              httpEffect,
              // The request's id, body limit and parent span, provided as one context.
              Context.make(Correlation, correlation).pipe(Context.add(HttpIncomingMessage.MaxBodySize, maxBodySize), Context.add(Tracer.ParentSpan, span)),
              requestId,
              limits.requestTimeoutMs
            )
            if (Option.isNone(outcome)) {
              return frontError(504, {
                error: "timeout",
                message: `The request did not complete within ${limits.requestTimeoutMs} ms and was abandoned. A mutation may still commit: repeat it with the same invocationId to learn its outcome.`,
                requestId
              })
            }
            return Exit.isSuccess(outcome.value) ? outcome.value.value : yield* fromCause(outcome.value.cause, requestId)
          })

          return answer.pipe(
            Effect.map((response) => HttpServerResponse.setHeader(response, requestIdHeader, requestId)),
            Effect.tap((response) => finish(response.status)),
            // A caller that hangs up interrupts the whole request; it still gets its log line.
            Effect.onInterrupt(() => finish(499))
          )
        })
      })
  }),
  { global: true }
)

/**
 * The gate in front of every route under `/db`: the bearer gate for the `db` resource,
 * then the body read under the size limit before the RPC layer (which would otherwise
 * turn an oversized body into a defect). An RPC handler fails with an engine refusal
 * (`answerRpc`), the route fails the exchange with it, and the gate answers it for the whole
 * HTTP request: 403 for a missing scope, 503 for an overloaded writer or an unavailable database.
 */
import { HttpIncomingMessage, HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { type PublicError } from "@cairn/domain/PublicError"
import { Context, Effect, Layer, Option } from "effect"
import { BearerGate } from "./BearerGate.js"
import { Correlation } from "../engine/Correlation.js"
import { rpcCors } from "./CorsOrigins.js"
import { CurrentTransport, type TransportName } from "../engine/EngineMetrics.js"
import * as FrontMetrics from "../operations/FrontMetrics.js"
import { frontError, payloadTooLarge } from "../internal/frontError.js"
import { Limits } from "./Limits.js"
import { bodyText, isTooLarge } from "./RequestBody.js"
import { type EngineError, type InternalFailure, isRefusal, type Refusal, scrubDefects } from "../engine/Refusal.js"
import { type Framing, ParsedEnvelope, readEnvelope } from "./RpcEnvelope.js"

/**
 * The gate of routes whose body is an RPC envelope in `framing`, or of any other `/db` route
 * (`undefined`); `transport` names the way in for the engine's metrics (`CurrentTransport`);
 * `tags` are the RPCs the route serves (a request for another is answered 400 here).
 */
export const dbGate = (framing: Framing | undefined, transport?: TransportName, tags?: ReadonlyArray<string>) =>
  HttpLayerRouter.middleware(
    Effect.gen(function* () {
      const gate = yield* BearerGate
      const limits = yield* Limits
      return (httpEffect) => {
        const gated = (request: HttpServerRequest.HttpServerRequest) =>
          Effect.gen(function* () {
            const admitted = yield* Effect.either(gate.authenticate(request, "db"))
            if (admitted._tag === "Left") return admitted.left
            const principal = admitted.right
            const requestId = yield* Correlation.id

            // Read (and cache on the request) the body under the limit before the RPC layer (the front's
            // context already holds that limit; setting it again would cost a context swap per request).
            const inPlace = yield* HttpIncomingMessage.MaxBodySize
            const body = yield* (Option.isSome(inPlace) && inPlace.value <= limits.maxBodyBytes
              ? bodyText(request)
              : bodyText(request).pipe(HttpServerRequest.withMaxBodySize(Option.some(limits.maxBodyBytes)))
            ).pipe(Effect.either)
            if (body._tag === "Left") {
              return isTooLarge(body.left)
                ? payloadTooLarge(requestId, limits.maxBodyBytes)
                : frontError(400, { error: "invalid_request", message: "The request body could not be read.", requestId })
            }
            if (Buffer.byteLength(body.right) > limits.maxBodyBytes) return payloadTooLarge(requestId, limits.maxBodyBytes)
            const envelope = framing === undefined ? undefined : readEnvelope(body.right, framing, tags)
            if (envelope?.problem !== undefined) return frontError(400, { error: "invalid_request", message: envelope.problem, requestId })

            // The messages the envelope check parsed go to the RPC layer, which then does not parse the body again.
            const services: Context.Context<CurrentPrincipal> =
              envelope === undefined
                ? Context.make(CurrentPrincipal, principal)
                : Context.make(CurrentPrincipal, principal).pipe(Context.add(ParsedEnvelope, envelope.messages))
            // A route whose handler was refused fails with the refusal (RPC answers themselves are always 200).
            return yield* Effect.provide(httpEffect, transport === undefined ? services : Context.add(services, CurrentTransport, transport)).pipe(
              Effect.catchAll((error) => (isRefusal(error) ? gate.refuse("db", principal, error) : Effect.fail(error)))
            )
          })
        return Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          // A CORS preflight carries no token: it is answered before the gate, for allowed origins only.
          const preflight = request.method === "OPTIONS" ? yield* gate.preflight(request, rpcCors) : undefined
          if (preflight !== undefined) return preflight
          return HttpServerResponse.setHeaders(yield* gated(request), gate.cors(request))
        })
      }
    })
  )

/**
 * One RPC's engine answer as the RPC layer sends it: public errors as typed failures, a
 * defect as a generic defect naming the request id, and the other refusals as failures the
 * route reads from the exit and answers for the whole request (`ServedError`: never sent as
 * the RPC's answer). Outcomes are counted by tag.
 */
export const answerRpc =
  (rpc: string) =>
  <A, R>(effect: Effect.Effect<A, EngineError, R>): Effect.Effect<A, PublicError | Exclude<Refusal, InternalFailure>, R> =>
    effect.pipe(
      scrubDefects(rpc),
      Effect.tap(() => FrontMetrics.recordRpc(rpc, "ok")),
      Effect.catchAll((error): Effect.Effect<never, PublicError | Exclude<Refusal, InternalFailure>> =>
        isRefusal(error)
          ? Effect.zipRight(
              FrontMetrics.recordRpc(rpc, error._tag === "InternalFailure" ? "defect" : error._tag),
              error._tag === "InternalFailure" ? Effect.die(error.message) : Effect.fail(error)
            )
          : Effect.zipRight(FrontMetrics.recordRpc(rpc, error.code), Effect.fail(error))
      )
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

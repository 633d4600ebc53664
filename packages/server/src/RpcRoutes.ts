/**
 * `POST /db/rpc`: the typed data plane (`DataRpcs`) over @effect/rpc with JSON
 * serialization. A gate in front of the RPC layer authenticates the bearer token (real
 * 401s with `WWW-Authenticate`), reads the body under the size limit, and turns a writer
 * overload into 503 + `Retry-After`; the handlers call the one `DataPlane` engine.
 */
import { RpcSerialization, RpcServer } from "@effect/rpc"
import {
  Authentication,
  CurrentPrincipal,
  dataRpcPath,
  DataRpcsWire,
  decodeDescribeRequest,
  decodeMutateRequest,
  InternalError,
  type Overloaded,
  type PublicError
} from "@cairn/domain"
import { decodeQueryRequest, QueryLimits } from "@cairn/query"
import { Cause, Effect, Layer, Option } from "effect"
import { Correlation } from "./Correlation.js"
import { DataPlane } from "./DataPlane.js"
import { DbAuthentication, DbGate, Exchange } from "./DbGate.js"
import * as FrontMetrics from "./FrontMetrics.js"

export const rpcPath = dataRpcPath

/** The wire group, behind the gate: every RPC receives the principal the gate verified. */
const ServedRpcs = DataRpcsWire.middleware(Authentication)

/** Metrics for every outcome; defects are logged with the request id and replaced by a generic message. */
const observe =
  (rpc: string) =>
  <A, R>(effect: Effect.Effect<A, PublicError, R>): Effect.Effect<A, PublicError, R> =>
    effect.pipe(
      Effect.tap(() => FrontMetrics.recordRpc(rpc, "ok")),
      Effect.tapError((error) => FrontMetrics.recordRpc(rpc, error.code)),
      Effect.catchAllDefect((defect) =>
        Effect.gen(function* () {
          yield* FrontMetrics.recordRpc(rpc, "defect")
          // The engine already logged this one under its reference; its message is safe to show.
          if (defect instanceof InternalError) return yield* Effect.die(defect.message)
          const requestId = yield* Correlation.id
          yield* Effect.logError(`${rpc} failed inside the server`, Cause.die(defect))
          return yield* Effect.die(
            `The server failed while handling this request; it was logged as ${requestId}. Retry later, or report that reference.`
          )
        })
      )
    )

/** The overload becomes the gate's 503; the RPC answer itself is discarded. */
const refuseOverloaded = (overloaded: Overloaded) =>
  Effect.gen(function* () {
    yield* FrontMetrics.recordRpc("Mutate", "overloaded")
    const exchange = yield* Effect.serviceOption(Exchange)
    if (Option.isNone(exchange)) return yield* Effect.dieMessage("overload outside the /db gate")
    exchange.value.retryAfterSeconds = overloaded.retryAfterSeconds
    exchange.value.overloadMessage = overloaded.message
    return yield* Effect.interrupt
  })

const Handlers = ServedRpcs.toLayer(
  Effect.gen(function* () {
    const plane = yield* DataPlane
    // The operator's query budget, which the strict query decoder checks filters against.
    const queryLimits = yield* QueryLimits
    return ServedRpcs.of({
      Describe: (payload) =>
        Effect.all([CurrentPrincipal, decodeDescribeRequest(payload)]).pipe(
          Effect.flatMap(([principal, request]) => plane.describe(principal, request)),
          observe("Describe")
        ),
      Query: (payload) =>
        Effect.all([CurrentPrincipal, decodeQueryRequest(payload).pipe(Effect.provideService(QueryLimits, queryLimits))]).pipe(
          Effect.flatMap(([principal, request]) => plane.query(principal, request)),
          observe("Query")
        ),
      Mutate: (payload) =>
        Effect.all([CurrentPrincipal, decodeMutateRequest(payload)]).pipe(
          Effect.flatMap(([principal, request]) => plane.mutate(principal, request)),
          Effect.catchTag("Overloaded", refuseOverloaded),
          observe("Mutate")
        )
    })
  })
)

/** The `/db/rpc` route. Needs the `DataPlane`, `Identity` and `Limits`; serve it with `FrontMiddleware`. */
export const RpcRoutes = RpcServer.layerHttpRouter({
  group: ServedRpcs,
  path: rpcPath,
  protocol: "http",
  // One failing RPC must not end the others of the same HTTP request.
  disableFatalDefects: true
}).pipe(Layer.provide([Handlers, DbAuthentication, RpcSerialization.layerJson, DbGate.layer]))

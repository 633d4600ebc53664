/**
 * `POST /db/rpc`: the typed data plane (`DataRpcs`) over @effect/rpc with JSON
 * serialization, behind the `/db` gate. Each handler hands the raw payload and the
 * verified principal to the `DataPlane` and maps its answer (`answerRpc`); a refusal in
 * its exit fails the exchange, for the gate to answer. Nothing here decodes, authorizes or limits.
 */
import { HttpLayerRouter } from "@effect/platform"
import { Rpc, RpcGroup, RpcSerialization } from "@effect/rpc"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { dataRpcPath } from "@cairn/domain/DataRpcPath"
import { DataRpcsWire } from "@cairn/domain/DataRpcs"
import { Effect, Layer, Option, Schema } from "effect"
import { type QueryResult } from "@cairn/domain/Query"
import { DescribeResult } from "@cairn/domain/Describe"
import { Receipt } from "@cairn/domain/Receipt"
import { DataPlane } from "../engine/DataPlane.js"
import { answerRpc, DbAuthentication, dbGate } from "./DbGate.js"
import * as RpcExchange from "../internal/rpcExchange.js"
import { OperatorSettings } from "../operations/OperatorSettings.js"
import { type Refusal, refusalOfCause, ServedError } from "../engine/Refusal.js"

export const rpcPath = dataRpcPath

/**
 * A query's page as the server sends it: the planner builds it in its wire form (plain JSON
 * values; `QueryResult` transforms nothing), so encoding it field by field again would only
 * copy it (~50 µs for 50 rows). Clients still decode it with `QueryResult`.
 */
const SentQueryResult = Schema.declare((u: unknown): u is QueryResult => typeof u === "object" && u !== null && Array.isArray((u as QueryResult).rows), {
  identifier: "QueryResult"
})

/** The wire group as served: `DataRpcsWire`, with a query's page sent as built. */
class ServedWire extends RpcGroup.make(
  Rpc.make("Describe", { payload: Schema.Unknown, success: DescribeResult, error: ServedError }),
  Rpc.make("Query", { payload: Schema.Unknown, success: SentQueryResult, error: ServedError }),
  Rpc.make("Mutate", { payload: Schema.Unknown, success: Receipt, error: ServedError })
) {}

/** Compile-time guard: what is served answers exactly what clients of `DataRpcsWire` decode (refusals are never sent). */
type Served = RpcGroup.Rpcs<typeof ServedWire>
type Wire = RpcGroup.Rpcs<typeof DataRpcsWire>
type Sent<R> = R extends Rpc.Rpc<infer Tag, infer _P, infer S, infer E, infer _M> ? [Tag, S["Type"], S["Encoded"], Exclude<E["Type"], Refusal>] : never
export const servedMatchesWire: [Sent<Served>] extends [Sent<Wire>] ? ([Sent<Wire>] extends [Sent<Served>] ? true : never) : never = true

/** The served group, behind the gate: every RPC receives the principal the gate verified. */
const ServedRpcs = ServedWire.middleware(Authentication)

const Handlers = ServedRpcs.toLayer(
  Effect.gen(function* () {
    const plane = yield* DataPlane
    return ServedRpcs.of({
      Describe: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.describe(principal, payload)).pipe(answerRpc("Describe")),
      Query: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.query(principal, payload)).pipe(answerRpc("Query")),
      Mutate: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.mutate(principal, payload)).pipe(answerRpc("Mutate"))
    })
  })
)

/** The `/db/rpc` route. Needs the `DataPlane`, `BearerGate` and `Limits`; serve it with `FrontMiddleware`. */
export const RpcRoutes = Layer.effectDiscard(
  Effect.gen(function* () {
    const router = yield* HttpLayerRouter.HttpRouter
    const operator = yield* Effect.serviceOption(OperatorSettings)
    // Without a trace exporter nobody reads the per-RPC span (`http.front` and `DataPlane.*` still run).
    const tracing = !(Option.isSome(operator) && Option.isNone(operator.value.otlpEndpoint))
    yield* router.add("POST", rpcPath, yield* RpcExchange.make(ServedRpcs, { tracing, refusal: refusalOfCause }))
  })
).pipe(Layer.provide([Handlers, DbAuthentication, RpcSerialization.layerJson, dbGate("json", "rpc", [...ServedWire.requests.keys()]).layer]))

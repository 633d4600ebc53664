/**
 * `POST /db/rpc`: the typed data plane (`DataRpcs`) over @effect/rpc with JSON
 * serialization, behind the `/db` gate. Each handler hands the raw payload and the
 * verified principal to the `DataPlane` and maps its answer (`answerRpc`); nothing here
 * decodes, authorizes or limits.
 */
import { HttpLayerRouter } from "@effect/platform"
import { RpcSerialization, RpcServer } from "@effect/rpc"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { dataRpcPath } from "@cairn/domain/DataRpcPath"
import { DataRpcsWire } from "@cairn/domain/DataRpcs"
import { Effect, Layer, Option } from "effect"
import { DataPlane } from "./DataPlane.js"
import { answerRpc, DbAuthentication, dbGate } from "./DbGate.js"
import { CurrentTransport } from "./EngineMetrics.js"
import * as JsonHttpProtocol from "./internal/jsonHttpProtocol.js"
import { OperatorSettings } from "./OperatorSettings.js"

export const rpcPath = dataRpcPath

/** The wire group, behind the gate: every RPC receives the principal the gate verified. */
const ServedRpcs = DataRpcsWire.middleware(Authentication)

const rpc = Effect.provideService(CurrentTransport, "rpc")

const Handlers = ServedRpcs.toLayer(
  Effect.gen(function* () {
    const plane = yield* DataPlane
    return ServedRpcs.of({
      Describe: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.describe(principal, payload)).pipe(answerRpc("Describe"), rpc),
      Query: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.query(principal, payload)).pipe(answerRpc("Query"), rpc),
      Mutate: (payload) => Effect.flatMap(CurrentPrincipal, (principal) => plane.mutate(principal, payload)).pipe(answerRpc("Mutate"), rpc)
    })
  })
)

/** The route's protocol: @effect/rpc's HTTP exchange, lean per request (see `jsonHttpProtocol`). */
const ProtocolLive = Layer.effect(
  RpcServer.Protocol,
  Effect.gen(function* () {
    const router = yield* HttpLayerRouter.HttpRouter
    const { httpApp, protocol } = yield* JsonHttpProtocol.make
    yield* router.add("POST", rpcPath, httpApp)
    return protocol
  })
)

/** The `/db/rpc` route. Needs the `DataPlane`, `BearerGate` and `Limits`; serve it with `FrontMiddleware`. */
export const RpcRoutes = Layer.unwrapEffect(
  Effect.map(Effect.serviceOption(OperatorSettings), (operator) =>
    RpcServer.layer(ServedRpcs, {
      // One failing RPC must not end the others of the same HTTP request.
      disableFatalDefects: true,
      // Without a trace exporter nobody reads the per-RPC span (`http.front` and `DataPlane.*` still run).
      disableTracing: Option.isSome(operator) && Option.isNone(operator.value.otlpEndpoint)
    })
  )
).pipe(
  Layer.provide([Handlers, DbAuthentication]),
  Layer.provide(ProtocolLive.pipe(Layer.provide([RpcSerialization.layerJson, dbGate("json").layer])))
)

/**
 * Everything under `/db/*`: the RPC data plane, synchronization, and for any other
 * method or path the same gate first, so an anonymous caller learns nothing (401)
 * and an authenticated one gets a plain 404.
 */
import { HttpLayerRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Correlation } from "./Correlation.js"
import { dbGate } from "./DbGate.js"
import { frontError } from "./internal/frontError.js"
import { OperatorSettings } from "./OperatorSettings.js"
import { RpcRoutes } from "./RpcRoutes.js"
import { SyncRoutes } from "./SyncRoutes.js"

const notFound = Effect.map(Correlation.id, (requestId) =>
  frontError(404, { error: "not_found", message: "No route under /db serves this method and path.", requestId })
)

// `/db/*` does not match `/db` itself (nor `/db/`, which the router reads as `/db`).
const Unrouted = Layer.mergeAll(HttpLayerRouter.add("*", "/db", notFound), HttpLayerRouter.add("*", "/db/*", notFound)).pipe(
  Layer.provide(dbGate(undefined).layer)
)

/** `/db/sync` unless the operator switched sync off (`CAIRN_SYNC=off`): then it is a plain 404 behind the gate. */
const SyncIfOn = Layer.unwrapEffect(
  Effect.map(Effect.serviceOption(OperatorSettings), (settings) => (Option.isNone(settings) || settings.value.sync ? SyncRoutes : Layer.empty))
)

/** Needs the `DataPlane`, `BearerGate` and `Limits`. */
export const DbRoutes = Layer.mergeAll(RpcRoutes, SyncIfOn, Unrouted)

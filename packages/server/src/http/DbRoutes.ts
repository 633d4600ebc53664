/**
 * Everything under `/db/*`: the RPC data plane, synchronization, and for any other
 * method or path the same gate first, so an anonymous caller learns nothing (401)
 * and an authenticated one gets 405 (with `Allow`) for a path it used the wrong method on, else 404.
 */
import { HttpLayerRouter } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Correlation } from "../engine/Correlation.js"
import { dbGate } from "./DbGate.js"
import { frontError } from "../internal/frontError.js"
import { OperatorSettings } from "../operations/OperatorSettings.js"
import { refuseOtherMethods, routable } from "./MethodNotAllowed.js"
import { rpcPath, RpcRoutes } from "./RpcRoutes.js"
import { syncPath, SyncRoutes } from "./SyncRoutes.js"

const notFound = Effect.map(Correlation.id, (requestId) =>
  frontError(404, { error: "not_found", message: "No route under /db serves this method and path.", requestId })
)

// `/db/*` does not match `/db` itself (nor `/db/`, which the router reads as `/db`). Each method
// but HEAD (not "*"): the router serves HEAD by a path's GET route, so HEAD /db/rpc gets its 405.
const Unrouted = Layer.effectDiscard(
  Effect.flatMap(HttpLayerRouter.HttpRouter, (router) =>
    Effect.forEach(routable, (method) => Effect.zipRight(router.add(method, "/db", notFound), router.add(method, "/db/*", notFound)), { discard: true })
  )
).pipe(Layer.provide(dbGate(undefined).layer))

const syncOn = Effect.map(Effect.serviceOption(OperatorSettings), (settings) => Option.isNone(settings) || settings.value.sync)

/** `/db/sync` unless the operator switched sync off (`CAIRN_SYNC=off`): then it is a plain 404 behind the gate. */
const SyncIfOn = Layer.unwrapEffect(Effect.map(syncOn, (on) => (on ? SyncRoutes : Layer.empty)))

/** Another method on `/db/rpc` or `/db/sync` (both POST only): behind the same gate, 405 with `Allow`. */
const OtherMethods = Layer.effectDiscard(
  Effect.gen(function* () {
    const router = yield* HttpLayerRouter.HttpRouter
    yield* refuseOtherMethods(router, rpcPath, ["POST"])
    if (yield* syncOn) yield* refuseOtherMethods(router, syncPath, ["POST"])
  })
).pipe(Layer.provide(dbGate(undefined).layer))

/** Needs the `DataPlane`, `BearerGate` and `Limits`. */
export const DbRoutes = Layer.mergeAll(RpcRoutes, SyncIfOn, OtherMethods, Unrouted)

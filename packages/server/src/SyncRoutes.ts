/**
 * `POST /db/sync`: snapshot pages and the live changes stream (`SyncRpcs`) with NDJSON
 * framing, so each batch reaches the client as it is produced, behind the same `/db`
 * gate as `/db/rpc`. The handlers only pass the principal and the raw payload to the
 * `DataPlane`. A changes stream stays open as long as the client listens (the front's
 * request timeout bounds only the time to the first batch).
 */
import { RpcSerialization, RpcServer } from "@effect/rpc"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { SyncRpcsWire } from "@cairn/domain/SyncRpcs"
import { Effect, Layer, Stream } from "effect"
import { DataPlane } from "./DataPlane.js"
import { answerRpc, DbAuthentication, dbGate } from "./DbGate.js"

export const syncPath = "/db/sync"

const ServedSyncRpcs = SyncRpcsWire.middleware(Authentication)

const Handlers = ServedSyncRpcs.toLayer(
  Effect.gen(function* () {
    const plane = yield* DataPlane
    return ServedSyncRpcs.of({
      SyncSnapshot: (payload) =>
        Effect.flatMap(CurrentPrincipal, (principal) => plane.snapshot(principal, payload)).pipe(answerRpc("SyncSnapshot")),
      SyncChanges: (payload) =>
        Stream.unwrap(
          Effect.map(CurrentPrincipal, (principal) =>
            plane.changes(principal, payload).pipe(Stream.catchAll((error) => Stream.fromEffect(answerRpc("SyncChanges")(Effect.fail(error)))))
          )
        )
    })
  })
)

/** The `/db/sync` route. Needs the `DataPlane`, `BearerGate` and `Limits`. */
export const SyncRoutes = RpcServer.layerHttpRouter({
  group: ServedSyncRpcs,
  path: syncPath,
  protocol: "http",
  disableFatalDefects: true
}).pipe(Layer.provide([Handlers, DbAuthentication, RpcSerialization.layerNdjson, dbGate("ndjson").layer]))

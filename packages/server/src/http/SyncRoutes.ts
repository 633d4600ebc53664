/**
 * `POST /db/sync`: snapshot pages and the live changes stream (`SyncRpcs`) with NDJSON
 * framing, so each batch reaches the client as it is produced, behind the same `/db`
 * gate as `/db/rpc`. The handlers only pass the principal and the raw payload to the
 * `DataPlane`. A changes stream stays open as long as the client listens (the front's
 * request timeout bounds only the time to the first batch), and produces its next batch
 * only while the bytes its reader has not taken yet are within `syncStreamBufferBytes`;
 * a reader that stays behind for `syncStreamStallMs` gets, after what it was sent, a final
 * `SyncEnd` (`slow_reader`) and the end of the stream, and resumes from the last checkpoint it received. Once caught up, a
 * stream's batches are written to its exchange by the database's sync hub, pre-encoded
 * (`SyncLiveSink`), while the exchange holds at most the bound.
 */
import { HttpLayerRouter } from "@effect/platform"
import { Rpc, RpcGroup, RpcSerialization, RpcServer } from "@effect/rpc"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { SnapshotPage, syncEnd, SyncMessage } from "@cairn/domain/Sync"
import { SyncLiveSink } from "@cairn/domain/SyncLiveSink"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { DataPlane } from "../engine/DataPlane.js"
import { answerRpc, DbAuthentication, dbGate } from "./DbGate.js"
import { CurrentTransport } from "../engine/EngineMetrics.js"
import * as PacedHttpProtocol from "../internal/pacedHttpProtocol.js"
import { Limits } from "./Limits.js"
import { type Refusal, refusalOfCause, ServedError } from "../engine/Refusal.js"

export const syncPath = "/db/sync"

/**
 * `SyncRpcsWire` (of `@cairn/domain/SyncRpcs`) as served: a handler may also fail with a refusal (`ServedError`), which the
 * protocol reads from the exit and fails the exchange with, for the gate to answer.
 */
class ServedSyncWire extends RpcGroup.make(
  Rpc.make("SyncSnapshot", { payload: Schema.Unknown, success: SnapshotPage, error: ServedError }),
  Rpc.make("SyncChanges", { payload: Schema.Unknown, success: SyncMessage, error: ServedError, stream: true })
) {}

const ServedSyncRpcs = ServedSyncWire.middleware(Authentication)

/** The route's protocol, shared by the RPC server (transport) and the handlers (pacing). */
class Transport extends Context.Tag("@cairn/server/SyncRoutes/Transport")<Transport, PacedHttpProtocol.PacedProtocol<Refusal>>() {}

const TransportLive = Layer.effectContext(
  Effect.gen(function* () {
    const limits = yield* Limits
    const router = yield* HttpLayerRouter.HttpRouter
    const transport = yield* PacedHttpProtocol.make({ bufferBytes: limits.syncStreamBufferBytes, stallMs: limits.syncStreamStallMs, refusal: refusalOfCause })
    yield* router.add("POST", syncPath, transport.httpApp)
    return Context.make(Transport, transport).pipe(Context.add(RpcServer.Protocol, transport.protocol))
  })
)

const Handlers = ServedSyncRpcs.toLayer(
  Effect.gen(function* () {
    const plane = yield* DataPlane
    const transport = yield* Transport
    return ServedSyncRpcs.of({
      SyncSnapshot: (payload) =>
        Effect.flatMap(CurrentPrincipal, (principal) => plane.snapshot(principal, payload)).pipe(answerRpc("SyncSnapshot"), Effect.provideService(CurrentTransport, "sync")),
      SyncChanges: (payload, { clientId }) =>
        Stream.unwrap(
          Effect.map(CurrentPrincipal, (principal) => {
            const changes = plane.changes(principal, payload).pipe(
              Stream.catchAll((error) => Stream.fromEffect(answerRpc("SyncChanges")(Effect.fail(error)))),
              Stream.provideService(CurrentTransport, "sync")
            )
            // A caught-up stream's batches go straight to the exchange, pre-encoded by the hub.
            const direct = transport.direct(clientId)
            return transport.paced(clientId, direct === undefined ? changes : Stream.provideService(changes, SyncLiveSink, direct), syncEnd("slow_reader"))
          })
        )
    })
  })
)

/** The `/db/sync` route. Needs the `DataPlane`, `BearerGate` and `Limits`. */
export const SyncRoutes = RpcServer.layer(ServedSyncRpcs, { disableFatalDefects: true }).pipe(
  Layer.provide([Handlers, DbAuthentication]),
  Layer.provide(TransportLive.pipe(Layer.provide([RpcSerialization.layerNdjson, dbGate("ndjson", undefined, [...ServedSyncWire.requests.keys()]).layer])))
)

/**
 * Sync over HTTP under `/db/*`: the `SyncRpcs` group, served with NDJSON framing so the
 * changes stream reaches the client batch by batch while it stays open. Handlers get
 * the verified principal from the `Authentication` middleware, as the rest of `/db` does.
 */
import { RpcSerialization, RpcServer } from "@effect/rpc"
import type { View } from "@cairn/catalog"
import { Authentication, CurrentPrincipal, type Principal, SyncRpcs } from "@cairn/domain"
import { Databases } from "@cairn/store"
import { Effect, Layer, Stream } from "effect"
import { Sync } from "./Sync.js"

export const syncPath = "/db/sync"

/** The group as served: every RPC receives the principal the front verified. */
export const ServedSyncRpcs = SyncRpcs.middleware(Authentication)

export interface SyncHandlersOptions {
  /** The principal's visible catalog, from the compiled policy. */
  readonly view: (principal: Principal) => View
}

/** Handlers: each request holds its database open for as long as it (or its stream) runs. */
export const SyncHandlers = (options: SyncHandlersOptions) =>
  ServedSyncRpcs.toLayer(
    Effect.gen(function* () {
      const sync = yield* Sync
      const databases = yield* Databases
      // Activation failures are the operator's to fix; the caller sees an internal error.
      const open = (principal: Principal) => Effect.orDie(databases.activate(principal.databaseKey))
      return ServedSyncRpcs.of({
        SyncSnapshot: (request) =>
          Effect.scoped(
            Effect.gen(function* () {
              const principal = yield* CurrentPrincipal
              const database = yield* open(principal)
              return yield* sync.snapshot(principal, options.view(principal), database, request)
            })
          ),
        SyncChanges: (request) =>
          Stream.unwrapScoped(
            Effect.gen(function* () {
              const principal = yield* CurrentPrincipal
              const database = yield* open(principal)
              return sync.changes(principal, options.view(principal), database, request)
            })
          )
      })
    })
  )

/**
 * The `/db/sync` route. Needs `SyncHandlers`, the `Authentication` middleware and an
 * `HttpLayerRouter`; mount it behind the same authentication gate as `/db/rpc`.
 */
export const SyncRoutes = RpcServer.layerHttpRouter({
  group: ServedSyncRpcs,
  path: syncPath,
  protocol: "http",
  disableFatalDefects: true
}).pipe(Layer.provide(RpcSerialization.layerNdjson))

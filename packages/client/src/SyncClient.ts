/**
 * The Node sync client: keeps a local SQLite copy of a sync scope current. It restores
 * from disk, resumes from its durable cursor, follows resnapshot instructions by
 * discarding and refetching, and never uses data whose principal or database differs.
 * The protocol loop itself is `SyncLoop`, shared with the browser client.
 */
import type { RpcClientError } from "@effect/rpc"
import type { SqlError } from "@effect/sql"
import { type PublicError } from "@cairn/domain/PublicError"
import { type SyncScope } from "@cairn/domain/Sync"
import { Context, Effect, Layer, type Schedule, type Stream, type SubscriptionRef } from "effect"
import * as SyncLoop from "./SyncLoop.js"
import { type LocalRecord, SyncStore, type SyncStoreShape } from "./SyncStore.js"

export type SyncRpcClient = SyncLoop.SyncRpcClient
export type SyncStatus = SyncLoop.SyncStatus
export type HttpOptions = SyncLoop.HttpOptions

export type SyncClientError = PublicError | RpcClientError.RpcClientError | SqlError.SqlError

export interface SyncClientOptions {
  /** Path of the local SQLite file holding the snapshot and cursor. */
  readonly file: string
  readonly scope: SyncScope
  readonly rpc: SyncRpcClient
  /** How the live loop retries after a transport failure. */
  readonly retry?: Schedule.Schedule<unknown, unknown>
}

export interface SyncClientShape {
  readonly store: SyncStoreShape
  readonly status: SubscriptionRef.SubscriptionRef<SyncStatus>
  /** Takes a snapshot if needed, then applies every change committed so far and returns. */
  readonly syncOnce: Effect.Effect<void, SyncClientError>
  /** Synchronizes live until interrupted, retrying transport failures. */
  readonly run: Effect.Effect<never, SyncClientError>
  /** One entity's local records, again after every change; starts once the data is confirmed. */
  readonly live: (entity: string) => Stream.Stream<ReadonlyArray<LocalRecord>, SqlError.SqlError>
}

export const scopeKey = SyncLoop.scopeKey
export const isWrongEndpoint = SyncLoop.isWrongEndpoint

const make = Effect.fn("SyncClient.make")(function* (options: SyncClientOptions) {
  const store = yield* SyncStore.open(options.file)
  const loop = yield* SyncLoop.make(store, {
    scope: options.scope,
    rpc: options.rpc,
    ...(options.retry !== undefined ? { retry: options.retry } : {})
  })
  return { ...loop, store } satisfies SyncClientShape
})

export class SyncClient extends Context.Tag("@cairn/client/SyncClient")<SyncClient, SyncClientShape>() {
  static readonly make = make
  static readonly http = SyncLoop.http
  /** A client whose live loop runs in the background for the layer's lifetime. */
  static readonly layer = (options: SyncClientOptions) =>
    Layer.scoped(
      SyncClient,
      Effect.tap(make(options), (client) => Effect.forkScoped(client.run))
    )
}

/**
 * The sync protocol's client side, over any local store: snapshot (staged, resumable), resume
 * from the durable cursor, resnapshot on instruction, never merge another principal's or
 * database's facts, and live queries. The Node client runs it on SQLite, the browser on IndexedDB.
 */
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { RpcClient, type RpcClientError, RpcSerialization } from "@effect/rpc"
import { type PublicError } from "@cairn/domain/PublicError"
import { type SnapshotPage, type SyncBatch, type SyncCheckpoint, type SyncMessage, type SyncScope } from "@cairn/domain/Sync"
import { SyncRpcs } from "@cairn/domain/SyncRpcs"
import { Deferred, Effect, Layer, Option, Ref, Schedule, type Scope, Stream, SubscriptionRef } from "effect"
import type { LocalRecord, LocalStore, SyncStatus } from "./LocalStore.js"

/** The typed sync RPCs, however they are transported. */
export type SyncRpcClient = RpcClient.FromGroup<typeof SyncRpcs, RpcClientError.RpcClientError>

export type { LocalRecord, LocalStore, StagedSnapshot, StoredState, SyncStatus } from "./LocalStore.js"

export type SyncLoopError<E> = PublicError | RpcClientError.RpcClientError | E

export interface SyncLoopOptions {
  readonly scope: SyncScope
  readonly rpc: SyncRpcClient
  /**
   * Appended to the scope's key: stored data synced under another key is discarded before use.
   * The browser passes the signed-in subject and org, so a reload shows stored data at once only
   * when it was synced for the same sign-in (the server still confirms it on the first batch).
   */
  readonly identityKey?: string
  /** How the live loop retries after a transport failure. */
  readonly retry?: Schedule.Schedule<unknown, unknown>
}

export interface SyncLoop<E> {
  readonly store: LocalStore<E>
  readonly status: SubscriptionRef.SubscriptionRef<SyncStatus>
  /** Takes a snapshot if needed, then applies every change committed so far and returns. */
  readonly syncOnce: Effect.Effect<void, SyncLoopError<E>>
  /** Synchronizes live until interrupted, retrying transport failures. */
  readonly run: Effect.Effect<never, SyncLoopError<E>>
  /**
   * One entity's local records, again after every change. Starts once the data is confirmed, or
   * at once when an `identityKey` was given and the stored data was synced under the same key.
   */
  readonly live: (entity: string) => Stream.Stream<ReadonlyArray<LocalRecord>, E>
}

/** Canonical JSON, so the same scope always has the same key. */
export const scopeKey = (scope: SyncScope): string =>
  JSON.stringify(scope, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v
  )

/** The key stored data is kept under: the scope's, plus the identity the caller signed in as. */
export const storageKey = (options: Pick<SyncLoopOptions, "scope" | "identityKey">): string =>
  options.identityKey === undefined ? scopeKey(options.scope) : `${scopeKey(options.scope)}#${options.identityKey}`

type Outcome = "resnapshot" | "resume" | "ended"

const sameIdentity = (a: SyncCheckpoint, b: SyncCheckpoint) => a.subject === b.subject && a.database === b.database

export const make = <E>(store: LocalStore<E>, options: SyncLoopOptions) =>
  Effect.gen(function* () {
    const key = storageKey(options)
    const initial = yield* store.state
    const status = yield* SubscriptionRef.make<SyncStatus>({
      checkpoint: Option.map(initial, (s) => s.checkpoint),
      confirmed: false,
      resnapshots: 0
    })
    const ready = yield* Deferred.make<void>()
    if (options.identityKey !== undefined && Option.isSome(initial) && initial.value.scopeKey === key) {
      yield* Deferred.succeed(ready, undefined)
    }
    // Only one synchronization touches the store at a time.
    const lock = yield* Effect.makeSemaphore(1)

    const confirm = (checkpoint: SyncCheckpoint) =>
      Effect.zipRight(
        SubscriptionRef.update(status, (s) => ({ ...s, checkpoint: Option.some(checkpoint), confirmed: true })),
        Deferred.succeed(ready, undefined)
      )

    const forget = Effect.zipRight(
      store.discard,
      SubscriptionRef.update(status, (s) => ({ ...s, checkpoint: Option.none() }))
    )

    const snapshot: Effect.Effect<SyncCheckpoint, SyncLoopError<E>> = Effect.gen(function* () {
      const staged = yield* store.staged
      let after = Option.isSome(staged) && staged.value.scopeKey === key ? staged.value.next : undefined
      if (after === undefined) yield* store.beginSnapshot(key)
      for (;;) {
        const page: SnapshotPage = yield* options.rpc
          .SyncSnapshot({ scope: options.scope, ...(after !== undefined ? { after } : {}) })
          .pipe(
            // A continuation from an earlier session may no longer hold: start over once.
            Effect.catchIf(
              (e) => after !== undefined && e._tag === "InvalidQuery",
              () => Effect.zipRight(store.beginSnapshot(key), options.rpc.SyncSnapshot({ scope: options.scope }))
            )
          )
        if (page.checkpoint !== undefined) {
          yield* store.commitSnapshot(key, page.records, page.checkpoint)
          return page.checkpoint
        }
        if (page.next === undefined) return yield* Effect.dieMessage("snapshot page without next or checkpoint")
        yield* store.stagePage(page.records, page.next)
        after = page.next
      }
    })

    /** Where to resume from, after discarding data synced for another scope or sign-in. */
    const startingPoint = Effect.gen(function* () {
      const state = yield* store.state
      if (Option.isSome(state) && state.value.scopeKey === key) return state.value.checkpoint
      if (Option.isSome(state)) yield* forget
      const checkpoint = yield* snapshot
      yield* confirm(checkpoint)
      return checkpoint
    })

    /**
     * Follows one changes stream. Answers `"resnapshot"` when a resnapshot is needed, `"resume"`
     * when the server ended the stream to be resumed from the durable cursor (`SyncEnd`: its token
     * expired, or the reader was too slow), `"ended"` when the stream ended (caught up, non-live).
     */
    const follow = (from: SyncCheckpoint, live: boolean) =>
      Effect.gen(function* () {
        const current = yield* Ref.make(from)
        const handle = (message: SyncMessage) =>
          Effect.gen(function* () {
            if (message._tag === "Resnapshot") return "resnapshot" as const
            if (message._tag === "SyncEnd") return "resume" as const
            const batch: SyncBatch = message
            const stored = yield* Ref.get(current)
            // Never merge facts from another principal or database into the stored ones.
            if (!sameIdentity(stored, batch.checkpoint)) return "resnapshot" as const
            yield* store.apply(batch.changes, batch.checkpoint)
            yield* Ref.set(current, batch.checkpoint)
            yield* confirm(batch.checkpoint)
            return undefined
          })
        return yield* options.rpc.SyncChanges({ scope: options.scope, cursor: from.cursor, live }).pipe(
          Stream.mapEffect(handle),
          Stream.takeUntil((outcome) => outcome !== undefined),
          Stream.runLast,
          Effect.map((last): Outcome => Option.getOrUndefined(last) ?? "ended")
        )
      })

    const cycle = (live: boolean): Effect.Effect<void, SyncLoopError<E>> =>
      Effect.gen(function* () {
        for (;;) {
          const from = yield* startingPoint
          const outcome = yield* follow(from, live)
          if (outcome === "ended") return
          // Resumed at once from the durable cursor, with the token source's current token (read per request):
          // the same view resumes without a resnapshot; a changed one gets the server's resnapshot.
          if (outcome === "resume") continue
          // Discard first: nothing of the old view stays visible while the new one arrives.
          yield* forget
          yield* SubscriptionRef.update(status, (s) => ({ ...s, resnapshots: s.resnapshots + 1 }))
        }
      })

    const syncOnce = lock.withPermits(1)(cycle(false)).pipe(Effect.withSpan("SyncClient.syncOnce"))

    const retry = options.retry ?? Schedule.exponential("100 millis").pipe(Schedule.either(Schedule.spaced("5 seconds")))
    const run = lock
      .withPermits(1)(cycle(true))
      .pipe(
        // The network may come back; a wrong endpoint or a refused token will not.
        Effect.retry({
          schedule: retry,
          while: (e) => isRpcClientError(e) && !isWrongEndpoint(e)
        }),
        // A live stream ends only when the server lets it go (a restart): reconnect after a pause.
        Effect.zipRight(Effect.sleep("1 second")),
        Effect.forever,
        Effect.withSpan("SyncClient.run")
      )

    const live = (entity: string) => Stream.unwrap(Effect.as(Deferred.await(ready), store.watch(entity)))

    return { store, status, syncOnce, run, live } satisfies SyncLoop<E>
  })

const isRpcClientError = (e: unknown): e is RpcClientError.RpcClientError =>
  typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "RpcClientError"

export interface HttpOptions {
  /** The sync endpoint, e.g. `https://example.com/db/sync`. */
  readonly url: string
  /** The bearer token, read for every request so it can be refreshed. */
  readonly token: Effect.Effect<string>
}

/**
 * An answer that is not a sync stream: a wrong URL (another route, another server), a
 * refused token or a server error. Reported at once with what was expected, instead of
 * waiting on a body that will never hold a sync message; the live loop does not retry it.
 */
const notSync = (response: HttpClientResponse.HttpClientResponse) => {
  const type = response.headers["content-type"] ?? "no content type"
  const description =
    response.status >= 200 && response.status < 300
      ? `${response.request.url} answered ${type}, not a Cairn sync stream (application/ndjson): check that the URL is the server's /db/sync`
      : `${response.request.url} answered HTTP ${response.status}${response.status === 404 || response.status === 405 ? ": check that the URL is the server's /db/sync" : ""}`
  return new HttpClientError.ResponseError({ request: response.request, response, reason: "StatusCode", description })
}

const isSyncStream = (response: HttpClientResponse.HttpClientResponse) =>
  response.status >= 200 && response.status < 300 && (response.headers["content-type"] ?? "").startsWith("application/ndjson")

/**
 * Whether a client error says the endpoint is wrong (not worth retrying), rather than the network
 * failed: an answer that is not a sync stream (`notSync`). A server that says "not now" (429, 502,
 * 503, 504: overloaded, restarting, a database moving between servers) is retried like a dropped
 * connection, and so is a stream whose body broke off (its server died mid-stream).
 */
export const isWrongEndpoint = (error: unknown): boolean =>
  isRpcClientError(error) &&
  error.cause instanceof HttpClientError.ResponseError &&
  error.cause.reason === "StatusCode" &&
  !retryableStatuses.has(error.cause.response.status)

const retryableStatuses = new Set([429, 502, 503, 504])

/** The sync RPCs over streaming HTTP (NDJSON) with a bearer token. */
export const http = (options: HttpOptions): Effect.Effect<SyncRpcClient, never, Scope.Scope> =>
  RpcClient.make(SyncRpcs).pipe(
    Effect.provide(
      RpcClient.layerProtocolHttp({ url: options.url }).pipe(
        Layer.provide([
          RpcSerialization.layerNdjson,
          Layer.effect(
            HttpClient.HttpClient,
            Effect.map(HttpClient.HttpClient, (client) =>
              client.pipe(
                HttpClient.mapRequestEffect((request) => Effect.map(options.token, (token) => HttpClientRequest.bearerToken(request, token))),
                HttpClient.transformResponse(
                  Effect.flatMap((response) => (isSyncStream(response) ? Effect.succeed(response) : Effect.fail(notSync(response))))
                )
              )
            )
          ).pipe(Layer.provide(FetchHttpClient.layer))
        ])
      )
    )
  )

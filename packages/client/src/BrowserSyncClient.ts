/**
 * The browser sync client: `SyncLoop` over an IndexedDB store shared by every tab of the origin.
 * One tab leads (a Web Lock): it alone follows `/db/sync` and sends the outbox; every tab reads the
 * store and hears of changes on a BroadcastChannel. When the leading tab closes, another takes over.
 * Mutations are optimistic: stored in the outbox (shown at once), sent with their invocationId until
 * the server decides, resent with the same id after a reload, and dropped once the synced records
 * include their commit, or kept with the public reason when rejected.
 */
import type { SyncScope } from "@cairn/domain/Sync"
import { Cause, Clock, Context, Effect, Layer, Option, type Scope, Schedule, Stream, SubscriptionRef } from "effect"
import { CairnClient } from "./CairnClient.js"
import { IndexedDbStore, type IndexedDbError, type IndexedDbStoreShape, type Optimistic, type OutboxEntry, outboxTopic } from "./IndexedDbStore.js"
import { newInvocationId } from "./InvocationId.js"
import type { LocalRecord, SyncStatus } from "./LocalStore.js"
import * as SyncLoop from "./SyncLoop.js"
import { isTransportError } from "./TransportError.js"

export interface BrowserSyncClientOptions {
  /** The deployment's base URL (usually the page's origin). */
  readonly baseUrl: string
  /** The current access token for `{baseUrl}/db`. */
  readonly token: Effect.Effect<string>
  readonly scope: SyncScope
  /** Who signed in (e.g. `subject@org`): stored data of another sign-in is never shown. */
  readonly identityKey: string
  /** The IndexedDB database (and lock) name; one per app. */
  readonly name?: string
  /** How often the leader retries unsent mutations while the network is away. */
  readonly resendEvery?: Schedule.Schedule<unknown>
}

/** A row as the page shows it: a synced record, with pending optimistic changes applied. */
export interface ViewRow {
  readonly id: string
  readonly record: Readonly<Record<string, unknown>>
  /** An optimistic change the server has not confirmed in the synced records yet. */
  readonly pending: boolean
}

export type Role = "leader" | "follower"

export interface MutateArgs {
  readonly entity: string
  readonly operation: string
  readonly target?: string
  readonly input: Readonly<Record<string, unknown>>
  readonly optimistic: Optimistic
}

export interface BrowserSyncClientShape {
  readonly store: IndexedDbStoreShape
  readonly role: SubscriptionRef.SubscriptionRef<Role>
  /** The leader's sync status (the followers' stays empty). */
  readonly status: SubscriptionRef.SubscriptionRef<SyncStatus>
  /**
   * Why this tab's sync stopped for good, if it did: a refused token or a wrong endpoint (the live loop
   * retries network failures by itself). The page should ask to sign in again.
   */
  readonly stopped: SubscriptionRef.SubscriptionRef<Option.Option<string>>
  /** One entity as the page shows it, again after every change in any tab. */
  readonly view: (entity: string) => Stream.Stream<ReadonlyArray<ViewRow>, IndexedDbError>
  /** Stores an intent in the outbox (shown at once) and returns its invocationId. */
  readonly mutate: (args: MutateArgs) => Effect.Effect<string, IndexedDbError>
  /** Mutations the server rejected, with their public reason, until dismissed. */
  readonly rejected: Stream.Stream<ReadonlyArray<OutboxEntry>, IndexedDbError>
  readonly dismiss: (invocationId: string) => Effect.Effect<void, IndexedDbError>
}

/** The id an optimistic create is shown under until its record arrives. */
export const pendingId = (invocationId: string) => `pending:${invocationId}`

/** Applies the outbox to an entity's synced records. */
export const overlay = (entity: string, records: ReadonlyArray<LocalRecord>, outbox: ReadonlyArray<OutboxEntry>): ReadonlyArray<ViewRow> => {
  const rows = new Map<string, ViewRow>(records.map((r) => [r.id, { id: r.id, record: r.record, pending: false }]))
  for (const entry of outbox) {
    const o = entry.optimistic
    if (entry.status === "rejected" || o.entity !== entity) continue
    if (o._tag === "Create") {
      const id = pendingId(entry.invocationId)
      rows.set(id, { id, record: { ...o.record, id }, pending: true })
    } else {
      const row = rows.get(o.id)
      if (row !== undefined) rows.set(o.id, { id: o.id, record: { ...row.record, ...o.patch }, pending: true })
    }
  }
  return [...rows.values()]
}

/** Waits until this tab holds the app's Web Lock; holds it until the scope closes. */
const leadership = (name: string): Effect.Effect<void, never, Scope.Scope> =>
  typeof navigator === "undefined" || navigator.locks === undefined
    ? Effect.void
    : Effect.acquireRelease(
        Effect.async<() => void>((resume) => {
          const abort = new AbortController()
          navigator.locks
            .request(`cairn-sync-leader:${name}`, { signal: abort.signal }, () => new Promise<void>((release) => resume(Effect.succeed(release))))
            .catch(() => undefined)
          return Effect.sync(() => abort.abort())
        }),
        (release) => Effect.sync(release)
      ).pipe(Effect.asVoid)

export const make = (options: BrowserSyncClientOptions): Effect.Effect<BrowserSyncClientShape, IndexedDbError, Scope.Scope> =>
  Effect.gen(function* () {
    const name = options.name ?? "cairn"
    const store = yield* IndexedDbStore.open(name)
    const key = SyncLoop.storageKey(options)
    const role = yield* SubscriptionRef.make<Role>("follower")
    const stopped = yield* SubscriptionRef.make<Option.Option<string>>(Option.none())
    const rpc = yield* SyncLoop.http({ url: `${options.baseUrl.replace(/\/+$/, "")}/db/sync`, token: options.token })
    const loop = yield* SyncLoop.make(store, { scope: options.scope, rpc, identityKey: options.identityKey })
    const client = Context.get(yield* Layer.build(CairnClient.layerFetch({ baseUrl: options.baseUrl, token: options.token })), CairnClient)

    /** Sends every pending intent in order; stops at the first the network did not decide. */
    const sendPending = Effect.gen(function* () {
      for (const entry of yield* store.outbox) {
        if (entry.status !== "pending") continue
        const answer = yield* Effect.either(client.mutate(entry.request))
        if (answer._tag === "Right") {
          const receipt = answer.right
          yield* store.settle(
            entry.invocationId,
            receipt.outcome === "committed"
              ? { outcome: "committed", position: receipt.position }
              : { outcome: "rejected", reason: receipt.reason ?? "The operation was rejected." }
          )
        } else if (isTransportError(answer.left) && answer.left._tag !== "PayloadTooLarge") {
          return
        } else {
          // A public error (forbidden, invalid input, ...) decides the intent as surely as a receipt.
          yield* store.settle(entry.invocationId, { outcome: "rejected", reason: answer.left.message })
        }
      }
    }).pipe(Effect.withSpan("BrowserSyncClient.sendPending"))

    const resend = options.resendEvery ?? Schedule.spaced("2 seconds")
    const sender = Stream.merge(
      store.changes.pipe(Stream.filter((topics) => topics.includes(outboxTopic))),
      Stream.fromSchedule(resend)
    ).pipe(
      Stream.runForEach(() => Effect.catchAllCause(sendPending, (cause) => Effect.logWarning("outbox", cause)))
    )

    yield* Effect.forkScoped(
      Effect.gen(function* () {
        yield* leadership(name)
        yield* SubscriptionRef.set(role, "leader")
        yield* Effect.fork(sender)
        yield* Effect.catchAllCause(loop.run, (cause) =>
          Effect.zipRight(
            Effect.logError("sync stopped", cause),
            SubscriptionRef.set(
              stopped,
              Option.some(
                Cause.failureOption(cause).pipe(
                  Option.map((e) => (typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e))),
                  Option.getOrElse(() => "The sync stopped.")
                )
              )
            )
          )
        )
      }).pipe(Effect.scoped)
    )

    const view = (entity: string) =>
      store.watchView(entity).pipe(
        Stream.mapEffect(({ outbox, records }) =>
          // Stored data synced for another sign-in is not shown (the leader replaces it).
          Effect.map(store.state, (state) => overlay(entity, Option.isSome(state) && state.value.scopeKey === key ? records : [], outbox))
        )
      )

    const mutate = (args: MutateArgs) =>
      Effect.gen(function* () {
        const invocationId = newInvocationId()
        yield* store.enqueue({
          invocationId,
          request: {
            operation: { kind: "operation", owner: { kind: "entity", name: args.entity }, name: args.operation },
            ...(args.target !== undefined ? { target: { kind: "entity", entity: args.entity, id: args.target } } : {}),
            input: args.input,
            invocationId
          },
          optimistic: args.optimistic,
          createdAt: yield* Clock.currentTimeMillis,
          status: "pending"
        })
        return invocationId
      })

    const rejected = store.watchView(outboxTopic).pipe(Stream.map(({ outbox }) => outbox.filter((e) => e.status === "rejected")))

    return { store, role, status: loop.status, stopped, view, mutate, rejected, dismiss: store.dismiss } satisfies BrowserSyncClientShape
  })

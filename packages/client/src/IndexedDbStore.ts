/**
 * The browser sync client's local store on IndexedDB: records, the checkpoint they are current to,
 * a staging area for a snapshot still arriving, and the outbox of optimistic mutations. Every change
 * to records is one IndexedDB transaction with its checkpoint (and with dropping the outbox entries it
 * confirms), so a closed tab at any moment leaves records, cursor and outbox in step. Tabs of one
 * origin share the database; a BroadcastChannel tells every tab what changed.
 */
import type { MutateRequest } from "@cairn/domain/Mutate"
import type { SyncChange, SyncCheckpoint, SyncRecord } from "@cairn/domain/Sync"
import { Context, Data, Effect, Layer, Option, PubSub, Runtime, type Scope, Stream } from "effect"
import type { LocalRecord, LocalStore, StagedSnapshot, StoredState } from "./LocalStore.js"

/** IndexedDB refused or failed a request (quota, a blocked upgrade, storage cleared underneath). */
export class IndexedDbError extends Data.TaggedError("IndexedDbError")<{ readonly message: string }> {}

/** What an optimistic mutation shows until the server decides it. */
export type Optimistic =
  | { readonly _tag: "Create"; readonly entity: string; readonly record: Readonly<Record<string, unknown>> }
  | { readonly _tag: "Update"; readonly entity: string; readonly id: string; readonly patch: Readonly<Record<string, unknown>> }

/** One mutation intent kept until the synced data includes its commit, or until it is rejected. */
export interface OutboxEntry {
  readonly invocationId: string
  /** The request as sent, with its invocationId: resent unchanged after a reload. */
  readonly request: typeof MutateRequest.Encoded
  readonly optimistic: Optimistic
  readonly createdAt: number
  readonly status: "pending" | "committed" | "rejected"
  /** The receipt's commit position, once committed: the entry goes when the records reach it. */
  readonly position?: string
  /** The public reason, once rejected. */
  readonly reason?: string
}

/** The entity key every outbox change is announced under. */
export const outboxTopic = "#outbox"

export interface IndexedDbStoreShape extends LocalStore<IndexedDbError> {
  readonly name: string
  readonly outbox: Effect.Effect<ReadonlyArray<OutboxEntry>, IndexedDbError>
  readonly enqueue: (entry: OutboxEntry) => Effect.Effect<void, IndexedDbError>
  /** Records the server's decision: rejected entries stay (for their reason) until dismissed. */
  readonly settle: (
    invocationId: string,
    decision: { readonly outcome: "committed"; readonly position: string } | { readonly outcome: "rejected"; readonly reason: string }
  ) => Effect.Effect<void, IndexedDbError>
  readonly dismiss: (invocationId: string) => Effect.Effect<void, IndexedDbError>
  /** Records and outbox of one entity read in one transaction. */
  readonly view: (entity: string) => Effect.Effect<{ readonly records: ReadonlyArray<LocalRecord>; readonly outbox: ReadonlyArray<OutboxEntry> }, IndexedDbError>
  /** `view(entity)` again after every change to the entity's records or to the outbox, in any tab. */
  readonly watchView: (entity: string) => Stream.Stream<
    { readonly records: ReadonlyArray<LocalRecord>; readonly outbox: ReadonlyArray<OutboxEntry> },
    IndexedDbError
  >
  /** Entities changed by this tab or another one. */
  readonly changes: Stream.Stream<ReadonlyArray<string>>
}

const RECORDS = "records"
const STAGING = "staging"
const META = "meta"
const OUTBOX = "outbox"

/**
 * Opaque positions are compared only for "the records have reached this commit": the server
 * encodes them so that a longer one is later, and among equal lengths the larger string.
 */
export const positionReached = (current: string, wanted: string): boolean =>
  current.length !== wanted.length ? current.length > wanted.length : current >= wanted

const fail = (what: string, error: unknown) =>
  new IndexedDbError({ message: `IndexedDB ${what}: ${error instanceof Error ? error.message : String(error ?? "failed")}` })

const openDatabase = (name: string) =>
  Effect.async<IDBDatabase, IndexedDbError>((resume) => {
    const request = indexedDB.open(name, 1)
    request.onupgradeneeded = () => {
      const db = request.result
      db.createObjectStore(RECORDS, { keyPath: ["entity", "id"] })
      db.createObjectStore(STAGING, { keyPath: ["entity", "id"] })
      db.createObjectStore(META)
      db.createObjectStore(OUTBOX, { keyPath: "invocationId" })
    }
    request.onsuccess = () => resume(Effect.succeed(request.result))
    request.onerror = () => resume(Effect.fail(fail("open", request.error)))
    request.onblocked = () => resume(Effect.fail(fail("open", "blocked by another tab holding an older version")))
  })

const entityRange = (entity: string) => IDBKeyRange.bound([entity, ""], [entity, []])

interface StoredRow {
  readonly entity: string
  readonly id: string
  readonly record: Readonly<Record<string, unknown>>
}

/** A store over the named database, open for the scope. */
export const open = (name: string): Effect.Effect<IndexedDbStoreShape, IndexedDbError, Scope.Scope> =>
  Effect.gen(function* () {
    const db = yield* Effect.acquireRelease(openDatabase(name), (db) => Effect.sync(() => db.close()))
    const hub = yield* Effect.acquireRelease(PubSub.unbounded<ReadonlyArray<string>>(), PubSub.shutdown)
    const runtime = yield* Effect.runtime<never>()
    const channel = yield* Effect.acquireRelease(
      Effect.sync(() => new BroadcastChannel(`cairn-store:${name}`)),
      (channel) => Effect.sync(() => channel.close())
    )
    channel.onmessage = (event: MessageEvent<unknown>) => {
      if (Array.isArray(event.data)) Runtime.runFork(runtime)(PubSub.publish(hub, event.data as ReadonlyArray<string>))
    }
    const announce = (entities: ReadonlyArray<string>) =>
      entities.length === 0
        ? Effect.void
        : Effect.zipRight(
            Effect.sync(() => channel.postMessage([...entities])),
            PubSub.publish(hub, entities)
          )

    /**
     * Runs `body` in one transaction and succeeds with what it produced once the transaction
     * committed: requests are issued synchronously from IndexedDB callbacks, as it requires.
     */
    const transact = <A>(
      stores: ReadonlyArray<string>,
      mode: IDBTransactionMode,
      body: (tx: IDBTransaction, done: (a: A) => void) => void
    ): Effect.Effect<A, IndexedDbError> =>
      Effect.async<A, IndexedDbError>((resume) => {
        let result: A | undefined
        let tx: IDBTransaction
        try {
          tx = db.transaction([...stores], mode)
        } catch (error) {
          return resume(Effect.fail(fail("transaction", error)))
        }
        tx.oncomplete = () => resume(Effect.succeed(result as A))
        tx.onerror = () => resume(Effect.fail(fail("transaction", tx.error)))
        tx.onabort = () => resume(Effect.fail(fail("transaction aborted", tx.error)))
        try {
          body(tx, (a) => (result = a))
        } catch (error) {
          tx.abort()
          resume(Effect.fail(fail("request", error)))
        }
      })

    const getMeta = <A>(tx: IDBTransaction, key: string, then: (a: A | undefined) => void) => {
      const request = tx.objectStore(META).get(key)
      request.onsuccess = () => then(request.result as A | undefined)
    }

    const entitiesOf = (tx: IDBTransaction, store: string, then: (entities: Set<string>) => void) => {
      const request = tx.objectStore(store).getAllKeys()
      request.onsuccess = () => then(new Set((request.result as Array<[string, string]>).map((k) => k[0])))
    }

    /** Drops committed outbox entries the records now include; returns their entities. */
    const pruneOutbox = (tx: IDBTransaction, position: string, then: (entities: ReadonlyArray<string>) => void) => {
      const request = tx.objectStore(OUTBOX).getAll()
      request.onsuccess = () => {
        const done = (request.result as Array<OutboxEntry>).filter(
          (e) => e.status === "committed" && e.position !== undefined && positionReached(position, e.position)
        )
        for (const e of done) tx.objectStore(OUTBOX).delete(e.invocationId)
        then(done.map((e) => e.optimistic.entity))
      }
    }

    const state = transact<Option.Option<StoredState>>([META], "readonly", (tx, done) =>
      getMeta<StoredState>(tx, "checkpoint", (s) => done(Option.fromNullable(s)))
    )

    const staged = transact<Option.Option<StagedSnapshot>>([META], "readonly", (tx, done) =>
      getMeta<{ scopeKey: string; next?: string }>(tx, "staged", (s) =>
        done(s === undefined || s.next === undefined ? Option.none() : Option.some({ scopeKey: s.scopeKey, next: s.next }))
      )
    )

    const apply = (changes: ReadonlyArray<SyncChange>, checkpoint: SyncCheckpoint) =>
      transact<ReadonlyArray<string>>([RECORDS, META, OUTBOX], "readwrite", (tx, done) =>
        getMeta<StoredState>(tx, "checkpoint", (current) => {
          if (current === undefined) {
            tx.abort()
            return
          }
          const records = tx.objectStore(RECORDS)
          for (const change of changes) {
            if (change._tag === "Upsert") records.put({ entity: change.entity, id: change.id, record: change.record })
            else records.delete([change.entity, change.id])
          }
          tx.objectStore(META).put({ scopeKey: current.scopeKey, checkpoint } satisfies StoredState, "checkpoint")
          pruneOutbox(tx, checkpoint.position, (pruned) => done([...changes.map((c) => c.entity), ...pruned]))
        })
      ).pipe(
        Effect.flatMap((entities) => announce([...new Set(entities), outboxTopic])),
        Effect.withSpan("IndexedDbStore.apply")
      )

    const beginSnapshot = (scopeKey: string) =>
      transact<void>([STAGING, META], "readwrite", (tx) => {
        tx.objectStore(STAGING).clear()
        tx.objectStore(META).put({ scopeKey }, "staged")
      })

    const stagePage = (records: ReadonlyArray<SyncRecord>, next: string) =>
      transact<void>([STAGING, META], "readwrite", (tx) => {
        const staging = tx.objectStore(STAGING)
        for (const r of records) staging.put({ entity: r.entity, id: r.id, record: r.record })
        getMeta<{ scopeKey: string }>(tx, "staged", (s) => {
          if (s === undefined) return tx.abort()
          tx.objectStore(META).put({ scopeKey: s.scopeKey, next }, "staged")
        })
      })

    const commitSnapshot = (scopeKey: string, last: ReadonlyArray<SyncRecord>, checkpoint: SyncCheckpoint) =>
      transact<ReadonlyArray<string>>([RECORDS, STAGING, META, OUTBOX], "readwrite", (tx, done) => {
        entitiesOf(tx, RECORDS, (before) => {
          const request = tx.objectStore(STAGING).getAll()
          request.onsuccess = () => {
            const rows = [...(request.result as Array<StoredRow>), ...last.map((r) => ({ entity: r.entity, id: r.id, record: r.record }))]
            const records = tx.objectStore(RECORDS)
            records.clear()
            for (const row of rows) records.put(row)
            tx.objectStore(STAGING).clear()
            tx.objectStore(META).delete("staged")
            tx.objectStore(META).put({ scopeKey, checkpoint } satisfies StoredState, "checkpoint")
            pruneOutbox(tx, checkpoint.position, (pruned) => done([...before, ...rows.map((r) => r.entity), ...pruned]))
          }
        })
      }).pipe(
        Effect.flatMap((entities) => announce([...new Set(entities), outboxTopic])),
        Effect.withSpan("IndexedDbStore.commitSnapshot")
      )

    const discard = transact<ReadonlyArray<string>>([RECORDS, STAGING, META], "readwrite", (tx, done) =>
      entitiesOf(tx, RECORDS, (before) => {
        tx.objectStore(RECORDS).clear()
        tx.objectStore(STAGING).clear()
        tx.objectStore(META).clear()
        done([...before])
      })
    ).pipe(Effect.flatMap(announce))

    const readRecords = (tx: IDBTransaction, entity: string, then: (rows: ReadonlyArray<LocalRecord>) => void) => {
      const request = tx.objectStore(RECORDS).getAll(entityRange(entity))
      request.onsuccess = () => then((request.result as Array<StoredRow>).map((r) => ({ id: r.id, record: r.record })))
    }

    const records = (entity: string) =>
      transact<ReadonlyArray<LocalRecord>>([RECORDS], "readonly", (tx, done) => readRecords(tx, entity, done))

    const dump = transact<ReadonlyMap<string, Readonly<Record<string, unknown>>>>([RECORDS], "readonly", (tx, done) => {
      const request = tx.objectStore(RECORDS).getAll()
      request.onsuccess = () => done(new Map((request.result as Array<StoredRow>).map((r) => [`${r.entity}/${r.id}`, r.record])))
    })

    const readOutbox = (tx: IDBTransaction, then: (entries: ReadonlyArray<OutboxEntry>) => void) => {
      const request = tx.objectStore(OUTBOX).getAll()
      request.onsuccess = () => then((request.result as Array<OutboxEntry>).sort((a, b) => a.createdAt - b.createdAt))
    }

    const outbox = transact<ReadonlyArray<OutboxEntry>>([OUTBOX], "readonly", readOutbox)

    const view = (entity: string) =>
      transact<{ records: ReadonlyArray<LocalRecord>; outbox: ReadonlyArray<OutboxEntry> }>([RECORDS, OUTBOX], "readonly", (tx, done) =>
        readRecords(tx, entity, (rows) => readOutbox(tx, (entries) => done({ records: rows, outbox: entries })))
      )

    const enqueue = (entry: OutboxEntry) =>
      transact<void>([OUTBOX], "readwrite", (tx) => {
        tx.objectStore(OUTBOX).put(entry)
      }).pipe(Effect.zipRight(announce([entry.optimistic.entity, outboxTopic])))

    const settle: IndexedDbStoreShape["settle"] = (invocationId, decision) =>
      transact<string | undefined>([OUTBOX, META], "readwrite", (tx, done) => {
        const request = tx.objectStore(OUTBOX).get(invocationId)
        request.onsuccess = () => {
          const entry = request.result as OutboxEntry | undefined
          if (entry === undefined) return
          done(entry.optimistic.entity)
          if (decision.outcome === "rejected") {
            tx.objectStore(OUTBOX).put({ ...entry, status: "rejected", reason: decision.reason } satisfies OutboxEntry)
            return
          }
          getMeta<StoredState>(tx, "checkpoint", (current) => {
            // The records may already include the commit (the stream outran the receipt).
            if (current !== undefined && positionReached(current.checkpoint.position, decision.position)) {
              tx.objectStore(OUTBOX).delete(invocationId)
            } else {
              tx.objectStore(OUTBOX).put({ ...entry, status: "committed", position: decision.position } satisfies OutboxEntry)
            }
          })
        }
      }).pipe(Effect.flatMap((entity) => announce(entity === undefined ? [] : [entity, outboxTopic])))

    const dismiss = (invocationId: string) =>
      transact<void>([OUTBOX], "readwrite", (tx) => {
        tx.objectStore(OUTBOX).delete(invocationId)
      }).pipe(Effect.zipRight(announce([outboxTopic])))

    const changes = Stream.fromPubSub(hub)

    /** `read` now and again after every change to one of `topics` (subscribed before the first read). */
    const following = <A>(topics: ReadonlyArray<string>, read: Effect.Effect<A, IndexedDbError>) =>
      Stream.unwrapScoped(
        Effect.map(PubSub.subscribe(hub), (subscription) =>
          Stream.concat(
            Stream.fromEffect(read),
            Stream.fromQueue(subscription).pipe(
              Stream.filter((entities) => entities.some((e) => topics.includes(e))),
              Stream.mapEffect(() => read)
            )
          )
        )
      )

    const watch = (entity: string) => following([entity], records(entity))
    const watchView = (entity: string) => following([entity, outboxTopic], view(entity))

    return {
      name,
      state,
      staged,
      apply,
      beginSnapshot,
      stagePage,
      commitSnapshot,
      discard,
      records,
      dump,
      watch,
      outbox,
      enqueue,
      settle,
      dismiss,
      view,
      watchView,
      changes
    } satisfies IndexedDbStoreShape
  })

export class IndexedDbStore extends Context.Tag("@cairn/client/IndexedDbStore")<IndexedDbStore, IndexedDbStoreShape>() {
  static readonly open = open
  static readonly layer = (name: string) => Layer.scoped(IndexedDbStore, open(name))
}

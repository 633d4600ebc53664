/**
 * Activates per-database SQLite files: one file per database key (named by a digest
 * of the key), one write connection and one read-only connection per open file, kept
 * open while in use, closed when idle or when too many are open. Callers hold a
 * database for a scope.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Cause, Clock, Data, Deferred, Effect, FiberId, FiberRef, HashMap, Metric, RcMap, type Scope } from "effect"
import { Digest } from "@cairn/catalog"
import { type Catalog } from "@cairn/catalog/Catalog"
import { DatabaseId, type DatabaseKey } from "@cairn/domain/Ids"
import { type Receipt } from "@cairn/domain/Receipt"
import * as Compaction from "./Compaction.js"
import { install } from "./Install.js"
import { MutationGuard } from "./MutationGuard.js"
import { OperationCatalog } from "./OperationCatalog.js"
import { StoreConfig } from "./StoreConfig.js"
import * as Writer from "./Writer.js"

/** An open database. Valid while the scope it was activated in is open. */
export interface Database {
  /** Opaque id (a digest of the key): safe for logs and metrics, never public. */
  readonly id: DatabaseId
  readonly catalog: Catalog
  /** A read-only connection for queries and sync. */
  readonly reader: SqlClient.SqlClient
  /** The single writer: every operation of this database passes through it. */
  readonly submit: (invocation: Writer.Invocation) => Effect.Effect<Receipt, Writer.SubmitError>
  /** The last committed position (0 when nothing is committed). */
  readonly position: Effect.Effect<number>
  /** Invocations waiting for the writer. */
  readonly queued: Effect.Effect<number>
  /** The last committed position, as it changes: what sync's live tail waits on. */
  readonly committed: Writer.Writer["committed"]
  /**
   * Compacts the log now, as its scheduled job does every `compactEvery`: keeps the change
   * payloads of the last `retainedCommits` commits; answers how many commits lost theirs.
   */
  readonly compact: Effect.Effect<number>
}

/**
 * Operator-facing: a database could not be opened or its catalog installed. Its message
 * names the internal id: log it, never show it to a caller.
 */
export class ActivationError extends Data.TaggedError("ActivationError")<{
  readonly databaseId: DatabaseId
  readonly cause: unknown
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Database ${this.databaseId} could not be activated: ${reason}`
  }
}

/** The opaque id of a database key: the file name, and what logs show. */
export const databaseId = (databaseKey: DatabaseKey): DatabaseId =>
  DatabaseId.make(Digest.databaseId(databaseKey))

export const activations = Metric.counter("cairn_database_activations_total", { description: "Databases opened" })
export const evictions = Metric.counter("cairn_database_evictions_total", {
  description: "Databases closed, by reason: idle, capacity, shutdown"
})
export const openDatabases = Metric.gauge("cairn_databases_open", { description: "Databases currently open" })

type CloseReason = "idle" | "capacity" | "shutdown"

export class Databases extends Effect.Service<Databases>()("@cairn/store/Databases", {
  scoped: Effect.gen(function* () {
    const config = yield* StoreConfig
    const operations = yield* OperationCatalog
    const guard = yield* MutationGuard
    const reactivity = yield* Reactivity.make
    const directory = join(config.dataDir, "databases")
    yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))

    // Bookkeeping next to the RcMap (which owns activation, ref counts and idle expiry).
    // Every step below that reads and changes it is synchronous: atomic on the one JS thread.
    /** Databases activated and not yet closed. */
    const opened = new Set<DatabaseId>()
    /** Callers holding (or waiting for) each database, and when it was last used: the LRU. */
    const usage = new Map<DatabaseId, { users: number; lastUsed: number }>()
    /** Files with a live activation, each with a latch completed once it is fully closed. */
    const files = new Map<DatabaseId, Deferred.Deferred<void>>()
    /** Databases being closed for capacity (any other close is idle expiry or shutdown). */
    const evicting = new Set<DatabaseId>()
    let shuttingDown = false
    const gauge = Effect.suspend(() => Metric.set(openDatabases, opened.size))

    const openFile = (id: DatabaseId) =>
      Effect.gen(function* () {
        const filename = join(directory, `${id}.sqlite`)
        const sql = yield* SqliteClient.make({ filename })
        yield* sql.unsafe(`PRAGMA synchronous = ${config.synchronous}`)
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        const installed = yield* install(sql, operations.catalog, id, now)
        // Opened after installation, so the file and its WAL exist for a read-only handle.
        const reader = yield* SqliteClient.make({ filename, readonly: true })
        const writer = yield* Writer.make({
          databaseId: id,
          sql,
          operations,
          guard,
          queueLimit: config.writerQueueLimit,
          maxBatch: config.groupCommitMaxBatch
        })
        const compact = Compaction.compact(writer, config.retainedCommits)
        yield* Compaction.schedule(compact, config.compactEvery, id)
        const database: Database = {
          id,
          catalog: operations.catalog,
          reader,
          submit: writer.submit,
          position: writer.position,
          queued: writer.queued,
          committed: writer.committed,
          compact
        }
        return { database, installed }
      }).pipe(Effect.provideService(Reactivity.Reactivity, reactivity))

    /** Opens one database in the RcMap entry's scope; everything it opened closes with that scope. */
    const lookup = (id: DatabaseId): Effect.Effect<Database, ActivationError, Scope.Scope> =>
      Effect.gen(function* () {
        // One file, one writer: a new activation of a file waits until its previous one has closed.
        for (;;) {
          const previous = files.get(id)
          if (previous === undefined) break
          yield* Deferred.await(previous)
        }
        const closed = Deferred.unsafeMake<void>(FiberId.none)
        files.set(id, closed)
        let activated = false
        // Added first, so it runs last: after the writer, the reader and the file are closed.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            files.delete(id)
            const reason: CloseReason = shuttingDown ? "shutdown" : evicting.has(id) ? "capacity" : "idle"
            evicting.delete(id)
            if (usage.get(id)?.users === 0) usage.delete(id)
            if (activated) {
              opened.delete(id)
              yield* Metric.increment(Metric.tagged(evictions, "reason", reason))
              yield* gauge
              // Closed from whichever fiber let it go (an idle timer, a release): none of its request's annotations.
              yield* Effect.logInfo("database closed").pipe(
                Effect.annotateLogs({ database: id, reason }),
                Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty())
              )
            }
            yield* Deferred.succeed(closed, undefined)
          })
        )
        const { database, installed } = yield* openFile(id).pipe(
          Effect.catchAllCause((cause) =>
            Effect.zipRight(
              Effect.logError("database activation failed", cause).pipe(Effect.annotateLogs({ database: id })),
              Effect.fail(new ActivationError({ databaseId: id, cause: Cause.squash(cause) }))
            )
          )
        )
        activated = true
        opened.add(id)
        yield* Metric.increment(activations)
        yield* gauge
        yield* Effect.logInfo("database activated").pipe(Effect.annotateLogs({ database: id, catalog: installed }))
        return database
      })

    // RcMap's own `capacity` refuses a new key when full; ours closes the least recently
    // used idle databases instead and lets in-use ones exceed it, so it is enforced below.
    const databases = yield* RcMap.make({ lookup, idleTimeToLive: config.idleTimeout })
    // Added after the RcMap, so it runs before the RcMap closes every database.
    yield* Effect.addFinalizer(() => Effect.sync(() => (shuttingDown = true)))

    /** Closes the least recently used idle databases while more than `maxOpenDatabases` are open. */
    const evictOverCapacity = Effect.suspend(() => {
      const excess = opened.size - evicting.size - config.maxOpenDatabases
      if (excess <= 0) return Effect.void
      const victims = [...opened]
        .filter((id) => !evicting.has(id) && (usage.get(id)?.users ?? 0) === 0)
        .sort((a, b) => (usage.get(a)?.lastUsed ?? 0) - (usage.get(b)?.lastUsed ?? 0))
        .slice(0, excess)
      for (const id of victims) evicting.add(id)
      return Effect.forEach(victims, (id) => RcMap.invalidate(databases, id), { discard: true })
    })

    const use = (id: DatabaseId) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          const entry = usage.get(id)
          if (entry) {
            entry.users += 1
            entry.lastUsed = now
          } else usage.set(id, { users: 1, lastUsed: now })
        })
      )

    const unuse = (id: DatabaseId) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.suspend(() => {
          const entry = usage.get(id)
          if (!entry) return Effect.void
          entry.users -= 1
          entry.lastUsed = now
          if (entry.users === 0 && !opened.has(id)) usage.delete(id)
          return entry.users === 0 ? evictOverCapacity : Effect.void
        })
      )

    /**
     * The database of `databaseKey`, created and laid out on first use. It stays open
     * (never closed under its users) until the caller's scope closes.
     */
    const activate = Effect.fn("Databases.activate")(function* (databaseKey: DatabaseKey) {
      const id = databaseId(databaseKey)
      // Counted before the RcMap reference is taken and released after it is dropped, so
      // a database with users is never chosen for eviction.
      yield* Effect.acquireRelease(use(id), () => unuse(id))
      const database = yield* RcMap.get(databases, id).pipe(
        // A failed activation is not kept: the next caller tries again.
        Effect.tapError(() => RcMap.invalidate(databases, id))
      )
      yield* evictOverCapacity
      return database
    })

    return {
      activate,
      /** Opaque ids of the open databases (for health and tests). */
      open: Effect.sync(() => [...opened])
    } as const
  })
}) {}

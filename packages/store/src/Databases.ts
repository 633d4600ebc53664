/**
 * Activates per-database SQLite files: one file per database key (named by a digest
 * of the key), one write connection and one read-only connection per open file, an
 * LRU of open databases that closes idle ones. Callers hold a database for a scope.
 */
import { createHash } from "node:crypto"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import {
  Cause,
  Clock,
  Data,
  Deferred,
  Duration,
  Effect,
  ExecutionStrategy,
  Exit,
  FiberId,
  Metric,
  Queue,
  Scope
} from "effect"
import type { Catalog } from "@cairn/catalog"
import { InternalError, type Receipt } from "@cairn/domain"
import { install } from "./Install.js"
import { MutationGuard } from "./MutationGuard.js"
import { OperationCatalog } from "./OperationCatalog.js"
import { StoreConfig } from "./StoreConfig.js"
import * as Writer from "./Writer.js"

/** An open database. Valid while the scope it was activated in is open. */
export interface Database {
  /** Opaque id (a digest of the key): safe for logs and metrics, never public. */
  readonly id: string
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
  /** Drops change payloads at or below a position (sync's retained history). */
  readonly compact: Writer.Writer["compact"]
}

/** Operator-facing: a database could not be opened or its catalog installed. */
export class ActivationError extends Data.TaggedError("ActivationError")<{
  readonly databaseId: string
  readonly cause: unknown
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Database ${this.databaseId} could not be activated: ${reason}`
  }
}

/** The opaque id of a database key: the file name, and what logs show. */
export const databaseId = (databaseKey: string): string =>
  createHash("sha256").update("cairn/database/v1\u0000").update(databaseKey).digest("hex").slice(0, 32)

export const activations = Metric.counter("cairn_database_activations_total", { description: "Databases opened" })
export const evictions = Metric.counter("cairn_database_evictions_total", {
  description: "Databases closed, by reason: idle, capacity, shutdown"
})
export const openDatabases = Metric.gauge("cairn_databases_open", { description: "Databases currently open" })

interface Entry {
  readonly id: string
  status: "opening" | "open" | "closing"
  readonly ready: Deferred.Deferred<Database, ActivationError>
  readonly closed: Deferred.Deferred<void>
  scope: Scope.CloseableScope | undefined
  leases: number
  lastUsed: number
}

type Lease =
  | { readonly _tag: "Wait"; readonly closed: Deferred.Deferred<void> }
  | { readonly _tag: "Join" | "Open"; readonly entry: Entry }

export class Databases extends Effect.Service<Databases>()("@cairn/store/Databases", {
  scoped: Effect.gen(function* () {
    const config = yield* StoreConfig
    const operations = yield* OperationCatalog
    const guard = yield* MutationGuard
    const reactivity = yield* Reactivity.make
    const serviceScope = yield* Effect.scope
    const directory = join(config.dataDir, "databases")
    yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))

    const entries = new Map<string, Entry>()
    /** Wakes the idle sweeper when a database is released. */
    const wake = yield* Queue.sliding<void>(1)
    const gauge = Effect.suspend(() => Metric.set(openDatabases, entries.size))

    const openFile = (id: string) =>
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
        const database: Database = { id, catalog: operations.catalog, reader, ...writer }
        return { database, installed }
      }).pipe(Effect.provideService(Reactivity.Reactivity, reactivity))

    const close = (entry: Entry, reason: "idle" | "capacity" | "shutdown") =>
      Effect.gen(function* () {
        if (entry.scope) yield* Scope.close(entry.scope, Exit.void)
        yield* Effect.sync(() => entries.get(entry.id) === entry && entries.delete(entry.id))
        yield* Deferred.succeed(entry.closed, undefined)
        yield* Metric.increment(Metric.tagged(evictions, "reason", reason))
        yield* gauge
        yield* Effect.logInfo("database closed").pipe(Effect.annotateLogs({ database: entry.id, reason }))
      })

    /** Marks the chosen idle databases as closing (in one synchronous step), then closes them. */
    const evict = (reason: "idle" | "capacity", choose: (open: ReadonlyArray<Entry>, now: number) => ReadonlyArray<Entry>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const victims = yield* Effect.sync(() => {
          const idle = [...entries.values()].filter((e) => e.status === "open" && e.leases === 0)
          const chosen = choose(idle, now)
          for (const e of chosen) e.status = "closing"
          return chosen
        })
        yield* Effect.forEach(victims, (e) => close(e, reason), { discard: true })
      })

    const overCapacity = evict("capacity", (idle) => {
      const live = [...entries.values()].filter((e) => e.status !== "closing").length
      const excess = live - config.maxOpenDatabases
      return excess <= 0 ? [] : [...idle].sort((a, b) => a.lastUsed - b.lastUsed).slice(0, excess)
    })

    const idleMillis = Duration.toMillis(config.idleTimeout)
    const sweepIdle = evict("idle", (idle, now) => idle.filter((e) => now - e.lastUsed >= idleMillis))

    const open = (entry: Entry) =>
      Effect.gen(function* () {
        const scope = yield* Scope.fork(serviceScope, ExecutionStrategy.sequential)
        entry.scope = scope
        const result = yield* Effect.exit(Scope.extend(openFile(entry.id), scope))
        if (Exit.isFailure(result)) {
          yield* Scope.close(scope, Exit.void)
          yield* Effect.sync(() => entries.get(entry.id) === entry && entries.delete(entry.id))
          const error = new ActivationError({ databaseId: entry.id, cause: Cause.squash(result.cause) })
          yield* Effect.logError("database activation failed", result.cause).pipe(Effect.annotateLogs({ database: entry.id }))
          yield* Deferred.fail(entry.ready, error)
          yield* Deferred.succeed(entry.closed, undefined)
          return
        }
        entry.status = "open"
        yield* Metric.increment(activations)
        yield* gauge
        yield* Effect.logInfo("database activated").pipe(
          Effect.annotateLogs({ database: entry.id, catalog: result.value.installed })
        )
        yield* Deferred.succeed(entry.ready, result.value.database)
        yield* overCapacity
      })

    // Bookkeeping runs in synchronous steps (atomic on the one JS thread), so the hot path
    // of an already open database takes no lock.
    const acquire = (id: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync((): Lease => {
          const existing = entries.get(id)
          if (existing?.status === "closing") return { _tag: "Wait", closed: existing.closed }
          if (existing) {
            existing.leases += 1
            existing.lastUsed = now
            return { _tag: "Join", entry: existing }
          }
          const entry: Entry = {
            id,
            status: "opening",
            ready: Deferred.unsafeMake<Database, ActivationError>(FiberId.none),
            closed: Deferred.unsafeMake<void>(FiberId.none),
            scope: undefined,
            leases: 1,
            lastUsed: now
          }
          entries.set(id, entry)
          return { _tag: "Open", entry }
        })
      )

    const release = (entry: Entry) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.suspend(() => {
          entry.leases -= 1
          entry.lastUsed = now
          if (entry.leases > 0) return Effect.void
          return entries.size > config.maxOpenDatabases ? Effect.zipRight(overCapacity, Queue.offer(wake, undefined)) : Queue.offer(wake, undefined)
        })
      )

    /**
     * The database of `databaseKey`, created and laid out on first use. It stays open
     * (never evicted) until the caller's scope closes.
     */
    const activate = Effect.fn("Databases.activate")(function* (databaseKey: string) {
      const id = databaseId(databaseKey)
      for (;;) {
        const lease = yield* Effect.acquireRelease(acquire(id), (l) => (l._tag === "Wait" ? Effect.void : release(l.entry)))
        if (lease._tag === "Wait") {
          yield* Deferred.await(lease.closed)
          continue
        }
        if (lease._tag === "Open") yield* Effect.uninterruptible(open(lease.entry))
        return yield* Deferred.await(lease.entry.ready)
      }
    })

    // Sleeps until the earliest idle deadline, or until a release changes the deadlines;
    // it never polls, so nothing runs while every database is in use or none is open.
    const sweeper = Effect.gen(function* () {
      for (;;) {
        yield* sweepIdle
        const now = yield* Clock.currentTimeMillis
        const deadlines = [...entries.values()].filter((e) => e.status === "open" && e.leases === 0).map((e) => e.lastUsed + idleMillis)
        const released = Queue.take(wake)
        yield* deadlines.length === 0 ? released : Effect.race(released, Effect.sleep(Duration.millis(Math.max(0, Math.min(...deadlines) - now))))
      }
    })
    yield* Effect.forkScoped(sweeper)
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...entries.values()], (e) => close(e, "shutdown"), { discard: true })
    )

    return {
      activate,
      /** Opaque ids of the open databases (for health and tests). */
      open: Effect.sync(() => [...entries.values()].filter((e) => e.status === "open").map((e) => e.id))
    } as const
  })
}) {}

/**
 * The caller's database for the current scope, for a request: a failure to open it is the
 * operator's to fix, logged under a reference; the caller sees only an `InternalError`.
 */
export const activateForRequest = (databaseKey: string) =>
  Effect.flatMap(Databases, (databases) =>
    databases.activate(databaseKey).pipe(
      Effect.catchAll((error) =>
        Effect.gen(function* () {
          const correlationId = crypto.randomUUID()
          yield* Effect.logError("database unavailable", error.message).pipe(Effect.annotateLogs({ correlationId }))
          return yield* Effect.die(InternalError.withReference(correlationId))
        })
      )
    )
  )

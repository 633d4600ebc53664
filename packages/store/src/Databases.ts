/**
 * Activates per-database SQLite files: one file per database key (named by a digest
 * of the key), one write connection per open file (and a read-only one while in use), kept
 * open while in use, closed when idle or when too many are open. Callers hold a
 * database for a scope. A database the `Registry` knows is verified before use and
 * never recreated: a missing, emptied, damaged, swapped or rolled-back file is a `StorageFault`.
 */
import { closeSync, mkdirSync, openSync, readSync, statSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Cause, Clock, Data, Deferred, Duration, Effect, Exit, FiberId, FiberRef, HashMap, Metric, MetricBoundaries, Option, RcMap, Scope } from "effect"
import { Digest } from "@cairn/catalog"
import { type Catalog } from "@cairn/catalog/Catalog"
import { DatabaseId, type DatabaseKey } from "@cairn/domain/Ids"
import { type Receipt } from "@cairn/domain/Receipt"
import * as Compaction from "./Compaction.js"
import * as Connection from "./internal/connection.js"
import * as Deadlines from "./internal/deadlines.js"
import { okPerTurn } from "./internal/okPerTurn.js"
import { currentElapsedMillis, elapsedMillis } from "@cairn/domain/Elapsed"
import { hotSpan } from "@cairn/domain/HotSpan"
import { install, installIdOf } from "./Install.js"
import { lastPosition } from "./Log.js"
import * as Migrations from "./Migrations.js"
import { MutationGuard } from "./MutationGuard.js"
import { OperationCatalog } from "./OperationCatalog.js"
import { type Registration, Registry } from "./Registry.js"
import { countWriteFault, type FaultKind, StorageFault, storageFaults } from "./StorageFault.js"
import { StoreConfig } from "./StoreConfig.js"
import * as Writer from "./Writer.js"

/** An open database. Valid while the scope it was activated in is open. */
export interface Database {
  /** Opaque id (a digest of the key): safe for logs and metrics, never public. */
  readonly id: DatabaseId
  readonly catalog: Catalog
  /**
   * A read-only connection for queries and sync, opened on first use and closed once idle for
   * `readerIdleTimeout` (never while a statement or transaction holds it). This client is built
   * on first use too, and dropped again once the database is idle: take it when needed, not ahead.
   */
  readonly reader: SqlClient.SqlClient
  /**
   * One read-only statement, its rows as arrays of column values: the planner's hot path (a cached
   * prepared statement, run synchronously on the write connection between its transactions, else on
   * the read connection). It sees the latest committed state, never an uncommitted write.
   */
  readonly values: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>>
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
  /** Set when the file is faulted (see `StorageFault`): nothing was recreated or overwritten. */
  readonly fault?: FaultKind | undefined
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Database ${this.databaseId} could not be activated: ${reason}`
  }
}

/** Hot-path spans, made only when a tracer is configured (see `@cairn/domain/HotSpan`). */
const activateSpan = hotSpan("Databases.activate")
const readSpan = hotSpan("sql.query", { attributes: { "db.system": "sqlite" } })

/** The opaque id of a database key: the file name, and what logs show. */
export const databaseId = (databaseKey: DatabaseKey): DatabaseId =>
  DatabaseId.make(Digest.databaseId(databaseKey))

export const activations = Metric.counter("cairn_database_activations_total", { description: "Databases opened", incremental: true })
export const activationLatency = Metric.histogram(
  "cairn_database_activation_duration_ms",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 14 }),
  "Milliseconds to open a database (checks, migrations, first connection)"
)
export const evictions = Metric.counter("cairn_database_evictions_total", {
  description: "Databases closed, by reason: idle, capacity, shutdown",
  incremental: true
})
export const openDatabases = Metric.gauge("cairn_databases_open", { description: "Databases currently open" })
export const openReaders = Metric.gauge("cairn_database_readers_open", {
  description: "Read connections currently open (each opened on demand, closed once idle)"
})

type CloseReason = "idle" | "capacity" | "shutdown"

/** The result of `Databases.check`: SQLite's `integrity_check` over the whole file. */
export interface IntegrityReport {
  readonly ok: boolean
  readonly problems: ReadonlyArray<string>
}

const sqliteHeader = "SQLite format 3\u0000"

/** Which file a path names: a file deleted or replaced under an open connection has another identity. */
interface FileIdentity {
  readonly dev: number
  readonly ino: number
}

export class Databases extends Effect.Service<Databases>()("@cairn/store/Databases", {
  scoped: Effect.gen(function* () {
    const config = yield* StoreConfig
    const operations = yield* OperationCatalog
    const guard = yield* MutationGuard
    const reactivity = yield* Reactivity.make
    const registry = yield* Registry
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
    /** Databases whose activation finished, until they start closing: what the cheap lease hands out. */
    const ready = new Map<DatabaseId, Database>()
    /**
     * While a database is open, one RcMap reference held for all of its users: a caller arriving
     * meanwhile takes the cheap lease (a counter) instead of an RcMap reference of its own. It
     * lingers `pinLinger` after the last user leaves (re-armed by each use: not a timer per request),
     * so requests that follow each other without overlapping, each holding the database for a
     * synchronous moment, keep taking the cheap lease; then the database is trimmed, and it closes
     * once unused for `idleTimeout` more (see `lingers` and `idles`).
     */
    const pins = new Map<DatabaseId, Scope.CloseableScope>()
    let shuttingDown = false
    /** Read connections open now (each database opens its own on demand). */
    let readers = 0
    const readerChanged = (open: boolean) => {
      readers += open ? 1 : -1
      openReaders.unsafeUpdate(readers, [])
    }
    const gauge = Effect.suspend(() => Metric.set(openDatabases, opened.size))
    /**
     * Storage faults found by this process. A faulted database stays refused until restart:
     * the operator repairs or restores its file with the server stopped, never under it.
     */
    const faults = new Map<DatabaseId, StorageFault>()
    /**
     * For each open database: its file is still the one it opened (checked on every activation, one
     * stat per turn of the event loop: see `okPerTurn`; each group commit stats it again anyway).
     */
    const guards = new Map<DatabaseId, () => StorageFault | undefined>()
    /**
     * For each open database: gives back what its connections rebuild on next use (see `Raw.trim`),
     * run when it goes idle (`pinLinger` unused, see `lingers`). A server holds
     * many open databases, most of them idle at any moment: each keeps its handles, not its working set.
     */
    const trims = new Map<DatabaseId, () => void>()
    /** For each open database: its next compaction run, forked in its scope (armed on `compactions`). */
    const compactionJobs = new Map<DatabaseId, { run: Effect.Effect<void> }>()

    const fault = (id: DatabaseId, kind: FaultKind, detail: string) => new StorageFault({ databaseId: id, kind, detail })

    /** Logged and counted once per database, whoever finds it (activation, a commit, a check). */
    const report = (error: StorageFault) =>
      Effect.suspend(() => {
        const id = error.databaseId as DatabaseId
        if (faults.has(id)) return Effect.void
        faults.set(id, error)
        return Effect.zipRight(
          Metric.increment(Metric.tagged(storageFaults, "kind", error.kind)),
          Effect.logError("storage fault", error.message).pipe(Effect.annotateLogs({ database: id, fault: error.kind }))
        )
      })

    /** What is at `filename` before SQLite opens it (which would create a missing file or write an empty one). */
    const inspect = (id: DatabaseId, filename: string): Effect.Effect<void, StorageFault> =>
      Effect.suspend(() => {
        const stat = statSync(filename, { throwIfNoEntry: false })
        if (stat === undefined) return Effect.fail(fault(id, "missing", "its file does not exist"))
        if (stat.size === 0) return Effect.fail(fault(id, "empty", "its file is empty"))
        const header = Buffer.alloc(16)
        const fd = openSync(filename, "r")
        try {
          readSync(fd, header, 0, 16, 0)
        } finally {
          closeSync(fd)
        }
        return header.toString("latin1") === sqliteHeader
          ? Effect.void
          : Effect.fail(fault(id, "corrupt", "its file is not a SQLite database"))
      })

    const identityOf = (filename: string): FileIdentity => {
      const stat = statSync(filename)
      return { dev: stat.dev, ino: stat.ino }
    }

    /** Whether the open file is still at its path: not removed (with `databases/` or alone), replaced or truncated; else its fault. */
    const fileFault = (id: DatabaseId, filename: string, identity: FileIdentity): StorageFault | undefined => {
      const stat = statSync(filename, { throwIfNoEntry: false })
      if (stat === undefined) return fault(id, "missing", "its file was removed while open")
      if (stat.dev !== identity.dev || stat.ino !== identity.ino) return fault(id, "missing", "its file was replaced while open")
      if (stat.size === 0) return fault(id, "empty", "its file was truncated while open")
      return undefined
    }

    /** A registered file, once open: intact pages, its own install id, not behind its known position. */
    const verify = (id: DatabaseId, sql: SqlClient.SqlClient, entry: Registration) =>
      Effect.gen(function* () {
        const checked = yield* sql.unsafe<{ readonly quick_check: string }>("PRAGMA quick_check")
        const problems = checked.map((r) => r.quick_check).filter((p) => p !== "ok")
        if (problems.length > 0) return yield* fault(id, "corrupt", `quick_check: ${problems.slice(0, 3).join("; ")}`)
        const held = yield* installIdOf(sql)
        if (Option.isNone(held)) return yield* fault(id, "foreign", "its file has no install record")
        if (held.value !== entry.install_id) {
          const owner = yield* registry.owner(held.value)
          const whose = Option.isSome(owner) ? `database ${owner.value.id}` : "an unknown database"
          return yield* fault(id, "foreign", `its file holds the install id of ${whose}`)
        }
        const position = yield* lastPosition(sql)
        if (position < entry.position) {
          return yield* fault(id, "rolled_back", `its file ends at position ${position}, but ${entry.position} was committed`)
        }
        return position
      }).pipe(Effect.catchAllCause((cause) => damaged(id, cause)))

    /**
     * A file SQLite reports as damaged or not a database is `corrupt`, whatever the statement that
     * found it; any other failure (interruption, no file descriptors left) stays an ordinary one.
     */
    const damaged = <E>(id: DatabaseId, cause: Cause.Cause<E>): Effect.Effect<never, E | StorageFault> => {
      const error = Cause.squash(cause)
      const code = (e: unknown) => (e as { readonly code?: unknown } | undefined)?.code
      const found = [code(error), code((error as { readonly cause?: unknown } | undefined)?.cause)].find((c) => typeof c === "string")
      return typeof found === "string" && (found.startsWith("SQLITE_CORRUPT") || found === "SQLITE_NOTADB")
        ? Effect.fail(fault(id, "corrupt", `unreadable: ${String(error)}`))
        : Effect.failCause(cause)
    }

    const openFile = (id: DatabaseId) =>
      Effect.gen(function* () {
        const filename = join(directory, `${id}.sqlite`)
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        const registered = yield* registry.lookup(id)
        if (Option.isSome(registered)) yield* inspect(id, filename)
        // A database never registered is created here (its directory too, if it was removed).
        else yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))
        const opened = Effect.gen(function* () {
          const connection = yield* Connection.open({ filename, cacheKib: config.sqliteCacheKib })
          yield* connection.sql.unsafe(`PRAGMA synchronous = ${config.synchronous}`)
          return connection
        })
        let connection: Connection.Opened
        let sql: SqlClient.SqlClient
        let installId: string
        if (Option.isSome(registered)) {
          const entry = registered.value
          // Verified before the catalog is installed: nothing is written to a file that is not this database's.
          connection = yield* opened.pipe(Effect.catchAllCause((cause) => damaged(id, cause)))
          sql = connection.sql
          const position = yield* verify(id, sql, entry)
          if (position > entry.position) yield* registry.advance(id, position)
          installId = entry.install_id
        } else {
          connection = yield* opened
          sql = connection.sql
          // A file from before the registry (or one whose registration a crash cut short) is adopted,
          // unless it is another registered database's file.
          const held = yield* installIdOf(sql)
          if (Option.isSome(held)) {
            const owner = yield* registry.owner(held.value)
            if (Option.isSome(owner) && owner.value.id !== id) {
              return yield* fault(id, "foreign", `its file holds the install id of database ${owner.value.id}`)
            }
          }
          installId = Option.getOrElse(held, () => crypto.randomUUID())
        }
        const installed = yield* install(sql, operations.catalog, id, now, installId)
        if (Option.isNone(registered)) {
          // Durable before the database is handed out, so before its first commit is acknowledged.
          yield* registry.register({ id, install_id: installed.installId, created_at: now, position: yield* lastPosition(sql) })
        }
        const identity = identityOf(filename)
        const guardFile = () => fileFault(id, filename, identity)
        // Opened after installation, so the file and its WAL exist for a read-only handle; opened only
        // when a read needs it (see `values`), and closed again once idle.
        const readConnection = yield* Connection.open({
          filename,
          readonly: true,
          cacheKib: config.sqliteCacheKib,
          lazy: { idleClose: config.readerIdleTimeout, onChange: readerChanged }
        })
        const values = (text: string, params: ReadonlyArray<unknown>) =>
          Connection.committedValues(connection, readConnection, text, params).pipe(
            Effect.orDie,
            // One cheap span per read statement when a tracer is configured (no captured stack, no text, never its values).
            readSpan
          )
        // Added before the writer, so it runs after the writer has stopped: the exact last position.
        let position: Effect.Effect<number> = Effect.succeed(0)
        yield* Effect.addFinalizer(() => Effect.flatMap(position, (p) => registry.advance(id, p)))
        const writer = yield* Writer.make({
          databaseId: id,
          sql,
          raw: connection.raw,
          // The catalog's operations plus the internal `_cairn.migrate` of declared migrations (Migrations.ts).
          operations: Migrations.withMigrations(operations, connection.raw),
          guard: Migrations.guardWith(guard),
          queueLimit: config.writerQueueLimit,
          maxBatch: config.groupCommitMaxBatch,
          // One stat per group commit: a file removed or replaced under the writer is never acknowledged into.
          beforeCommit: Effect.suspend(() => {
            const error = guardFile()
            return error === undefined ? Effect.void : Effect.zipRight(faulted(error), Effect.fail(error))
          })
        })
        position = writer.position
        // Declared migrations this database has not finished run now, batch by batch through its writer.
        yield* Migrations.runPending({
          databaseId: id,
          sql,
          catalog: operations.catalog,
          submit: writer.submit,
          onBatch: (b) => Effect.logInfo("migration batch committed").pipe(Effect.annotateLogs({ database: id, migration: b.migration, batch: b.batch, state: b.state }))
        })
        // The activation's one-time statements (install, verification, migrations) are not kept prepared.
        connection.raw.forget()
        const compact = Compaction.compact(writer, config.retainedCommits).pipe(
          Effect.tap(() => Effect.flatMap(writer.position, (p) => registry.advance(id, p)))
        )
        // Armed on the store's compaction queue (one fiber for every database), each run forked in
        // this database's scope (closing it interrupts a run), the next armed once it is done.
        const scope = yield* Effect.scope
        const job: { run: Effect.Effect<void> } = { run: Effect.void }
        const rearm = Effect.flatMap(currentElapsedMillis, (now) =>
          Effect.sync(() => {
            if (compactionJobs.get(id) === job) compactions.arm(id, now + compactEveryMillis)
          })
        )
        job.run = Effect.asVoid(Effect.forkIn(Effect.ensuring(Compaction.scheduled(compact, id), rearm), scope))
        compactionJobs.set(id, job)
        yield* rearm
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            if (compactionJobs.get(id) !== job) return
            compactionJobs.delete(id)
            compactions.disarm(id)
          })
        )
        guards.set(id, okPerTurn(guardFile))
        trims.set(id, () => {
          connection.raw.trim()
          readConnection.raw.trim()
        })
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            guards.delete(id)
            trims.delete(id)
          })
        )
        const database: Database = {
          id,
          catalog: operations.catalog,
          // Its @effect/sql face is built when first asked for (see `Connection.Opened.sql`).
          get reader() {
            return readConnection.sql
          },
          values,
          submit: writer.submit,
          position: writer.position,
          queued: writer.queued,
          committed: writer.committed,
          compact
        }
        return { database, installed: installed.outcome }
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
            ready.delete(id)
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
        const opening = yield* currentElapsedMillis
        const { database, installed } = yield* openFile(id).pipe(
          Effect.catchAllCause((cause) => {
            const failure = Cause.failureOption(cause)
            if (Option.isSome(failure) && failure.value instanceof StorageFault) {
              const error = failure.value
              return Effect.zipRight(report(error), Effect.fail(new ActivationError({ databaseId: id, cause: error, fault: error.kind })))
            }
            return Effect.zipRight(
              Effect.zipRight(countWriteFault(cause), Effect.logError("database activation failed", cause).pipe(Effect.annotateLogs({ database: id }))),
              Effect.fail(new ActivationError({ databaseId: id, cause: Cause.squash(cause) }))
            )
          })
        )
        activated = true
        opened.add(id)
        // Removed by the first finalizer the scope runs (before the writer stops).
        ready.set(id, database)
        yield* Effect.addFinalizer(() => Effect.sync(() => ready.delete(id)))
        yield* Metric.increment(activations)
        yield* Metric.update(activationLatency, (yield* currentElapsedMillis) - opening)
        yield* gauge
        yield* Effect.logInfo("database activated").pipe(Effect.annotateLogs({ database: id, catalog: installed }))
        return database
      })

    // RcMap's own `capacity` refuses a new key when full; ours closes the least recently
    // used idle databases instead and lets in-use ones exceed it, so it is enforced below.
    // No idle time of its own (a fiber per idle database): the shared reference is held until the
    // database has been unused for `idleTimeout` (see `idles`), and the last reference closes it.
    const databases = yield* RcMap.make({ lookup })
    /** How long an unused database keeps its shared reference (see `pins`): a second, or less than the idle timeout. */
    const pinLinger = Duration.min(Duration.seconds(1), config.idleTimeout)
    const lingerMillis = Duration.toMillis(pinLinger)
    const idleMillis = Duration.toMillis(config.idleTimeout)
    const compactEveryMillis = Duration.toMillis(config.compactEvery)

    // The store's timers, one fiber each whatever the number of open databases. Made after the
    // RcMap, so they are interrupted before it closes every database.
    /**
     * A database whose last user left `pinLinger` ago (each `leave` re-arms it): idle now, its
     * connections give back what they rebuild on next use; it closes `idleTimeout` later unless used.
     */
    const lingers = yield* Deadlines.make((id: DatabaseId) =>
      Effect.flatMap(currentElapsedMillis, (now) => {
        // Closed, or in use again: its users' last `leave` arms the next linger.
        if (!pins.has(id) || (usage.get(id)?.users ?? 0) > 0) return Effect.void
        trims.get(id)?.()
        if (Number.isFinite(idleMillis)) idles.arm(id, now + idleMillis)
        return Effect.void
      })
    )
    /** A database unused for `pinLinger` and then `idleTimeout`: its shared reference goes, and it closes. */
    const idles = yield* Deadlines.make((id: DatabaseId) =>
      Effect.suspend(() => ((usage.get(id)?.users ?? 0) > 0 ? Effect.void : releasePin(id)))
    )
    /** Each open database's next compaction (see `openFile`). */
    const compactions = yield* Deadlines.make((id: DatabaseId) => Effect.suspend(() => compactionJobs.get(id)?.run ?? Effect.void))

    /** A fault found in an open database: reported, and the database closes once its users let go. */
    const faulted = (error: StorageFault) =>
      Effect.zipRight(
        report(error),
        // Forked: the writer's own fiber may find it, and closing the database waits for that fiber.
        Effect.forkDaemon(
          Effect.suspend(() => {
            const id = error.databaseId as DatabaseId
            // A lingering shared reference is nobody's: it does not keep a faulted database open.
            return Effect.zipRight(RcMap.invalidate(databases, id), (usage.get(id)?.users ?? 0) === 0 ? releasePin(id) : Effect.void)
          })
        )
      )

    const refuse = (id: DatabaseId, error: StorageFault) => new ActivationError({ databaseId: id, cause: error, fault: error.kind })
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
      // Out of the map first, so letting go of a lingering shared reference closes it at once.
      return Effect.forEach(victims, (id) => Effect.zipRight(RcMap.invalidate(databases, id), releasePin(id)), { discard: true })
    })

    const enter = (id: DatabaseId, now: number) => {
      const entry = usage.get(id)
      if (entry) {
        entry.users += 1
        entry.lastUsed = now
      } else usage.set(id, { users: 1, lastUsed: now })
    }

    const use = (id: DatabaseId) => Effect.flatMap(currentElapsedMillis, (now) => Effect.sync(() => enter(id, now)))

    /** One user of `id` left at `now`. */
    const leave = (id: DatabaseId, now: number): Effect.Effect<void> => {
      const entry = usage.get(id)
      if (!entry) return Effect.void
      entry.users -= 1
      entry.lastUsed = now
      if (entry.users > 0) return Effect.void
      if (!opened.has(id)) usage.delete(id)
      // The last user left: the shared reference lingers (see `pins`) unless nothing may linger; then capacity.
      return Effect.zipRight(lingerMillis === 0 ? releasePin(id) : linger(id, now), evictOverCapacity)
    }

    const unuse = (id: DatabaseId) => Effect.flatMap(currentElapsedMillis, (now) => Effect.suspend(() => leave(id, now)))

    /** Drops the shared reference of `id`, if held: with no other reference, the RcMap's idle timer starts. */
    const releasePin = (id: DatabaseId) =>
      Effect.suspend(() => {
        const pin = pins.get(id)
        if (pin === undefined) return Effect.void
        pins.delete(id)
        return Scope.close(pin, Exit.void)
      })

    /** Starts (again) the linger of a database whose last user just left at `now`. */
    const linger = (id: DatabaseId, now: number) =>
      Effect.sync(() => {
        if (!pins.has(id)) return
        idles.disarm(id)
        lingers.arm(id, now + lingerMillis)
      })

    /** Takes the shared reference of a database in use (by the calling activation, so `users` > 0). */
    const pin = (id: DatabaseId) =>
      Effect.suspend(() => {
        if (pins.has(id)) return Effect.void
        return Effect.flatMap(Scope.make(), (scope) =>
          Effect.flatMap(Effect.exit(Scope.extend(RcMap.get(databases, id), scope)), (exit) => {
            if (Exit.isFailure(exit) || pins.has(id) || (usage.get(id)?.users ?? 0) === 0) return Scope.close(scope, Exit.void)
            pins.set(id, scope)
            return Effect.void
          })
        )
      })

    /**
     * The database of `databaseKey`, created and laid out on first use. It stays open
     * (never closed under its users) until the caller's scope closes.
     */
    /** The ids of recently activated keys: one digest per key, not per request (bounded). */
    const ids = new Map<DatabaseKey, DatabaseId>()
    const idOf = (databaseKey: DatabaseKey) => {
      let id = ids.get(databaseKey)
      if (id === undefined) {
        if (ids.size >= 4096) ids.clear()
        id = databaseId(databaseKey)
        ids.set(databaseKey, id)
      }
      return id
    }

    /**
     * One stat (shared by the requests of one turn of the event loop): a file removed or replaced since
     * it was opened is refused before anything is read or written.
     */
    const checked = (id: DatabaseId, database: Database): Effect.Effect<Database, ActivationError> =>
      Effect.suspend(() => {
        const error = guards.get(id)?.()
        return error === undefined ? Effect.succeed(database) : Effect.zipRight(faulted(error), Effect.fail(refuse(id, error)))
      })

    /** The first activation of a database by current users: an RcMap reference of its own, then the shared one. */
    const activateSlow = (id: DatabaseId) =>
      Effect.gen(function* () {
        // Counted before the RcMap reference is taken and released after it is dropped, so
        // a database with users is never chosen for eviction.
        yield* Effect.acquireRelease(use(id), () => unuse(id))
        const database = yield* RcMap.get(databases, id).pipe(
          // A failed activation is not kept: the next caller tries again.
          Effect.tapError(() => RcMap.invalidate(databases, id))
        )
        yield* checked(id, database)
        yield* pin(id)
        yield* evictOverCapacity
        return database
      })

    /**
     * The open database of an id that has users, if any: taken with a counter and one finalizer
     * (the shared RcMap reference keeps it open), not a reference of its own.
     */
    const leaseOpen = (id: DatabaseId, now: number): Database | undefined => {
      const database = ready.get(id)
      if (database === undefined || !pins.has(id) || shuttingDown) return undefined
      enter(id, now)
      return database
    }

    const activate = (databaseKey: DatabaseKey): Effect.Effect<Database, ActivationError, Scope.Scope> =>
      Effect.suspend((): Effect.Effect<Database, ActivationError, Scope.Scope> => {
        const id = idOf(databaseKey)
        const known = faults.get(id)
        if (known) return Effect.fail(refuse(id, known))
        return Effect.clockWith((clock) => Effect.uninterruptibleMask((restore) => {
          const database = leaseOpen(id, elapsedMillis(clock))
          if (database === undefined) return restore(activateSlow(id))
          return Effect.zipRight(
            Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, unuse(id))),
            restore(checked(id, database))
          )
        }))
      }).pipe(activateSpan)

    /**
     * `f` with the database of `databaseKey` held open for its duration, without a scope: the
     * request path's lease (a counter while the database is open and in use, else `activate`).
     */
    const withDatabase = <A, E, R>(
      databaseKey: DatabaseKey,
      f: (database: Database) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | ActivationError, R> =>
      Effect.suspend(() => {
        const id = idOf(databaseKey)
        const known = faults.get(id)
        if (known) return Effect.fail(refuse(id, known))
        return Effect.clockWith((clock) => Effect.uninterruptibleMask((restore) => {
          const database = leaseOpen(id, elapsedMillis(clock))
          if (database === undefined) return restore(Effect.scoped(Effect.flatMap(activate(databaseKey), f)))
          return Effect.ensuring(
            restore(Effect.flatMap(checked(id, database).pipe(activateSpan), f)),
            // `unuse(id)` with the clock at hand.
            Effect.suspend(() => leave(id, elapsedMillis(clock)))
          )
        }))
      })

    /**
     * SQLite's `integrity_check` over the whole file of `databaseKey` (slow on a large file: on
     * demand, not at every open). Problems make it a storage fault (`corrupt`) like any other.
     */
    const check = Effect.fn("Databases.check")(function* (databaseKey: DatabaseKey) {
      const database = yield* activate(databaseKey)
      const rows = yield* Effect.orDie(database.reader.unsafe<{ readonly integrity_check: string }>("PRAGMA integrity_check"))
      const problems = rows.map((r) => r.integrity_check).filter((p) => p !== "ok")
      if (problems.length > 0) yield* faulted(fault(database.id, "corrupt", `integrity_check: ${problems.slice(0, 3).join("; ")}`))
      return { ok: problems.length === 0, problems } satisfies IntegrityReport
    }, Effect.scoped)

    return {
      activate,
      withDatabase,
      check,
      /** Opaque ids of the open databases (for health and tests). */
      open: Effect.sync(() => [...opened])
    } as const
  }),
  // The registry is the data directory's lock: every assembly of the store takes it.
  dependencies: [Registry.Default]
}) {}

/**
 * One open database as the store's `RcMap` entry holds it: the `Database` its callers get, and all
 * that belongs to it while it is open (its file check, idle trim, compaction job, its users and the
 * shared reference they hold). Made when its activation starts, it lives and dies with the entry's
 * scope: nothing about one database is kept next to it (see `Databases` for its timeline).
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import type { SqlClient } from "@effect/sql"
import { Clock, Deferred, Duration, Effect, FiberId, Option, type Scope } from "effect"
import { type DatabaseId } from "@cairn/domain/Ids"
import { currentElapsedMillis } from "@cairn/domain/Elapsed"
import { hotSpan } from "@cairn/domain/HotSpan"
import { Archive } from "./Archive.js"
import * as Compaction from "./Compaction.js"
import { type Database } from "./Database.js"
import * as Connection from "./internal/connection.js"
import type * as Deadlines from "./internal/deadlines.js"
import { damaged, fault, fileFault, identityOf, inspect } from "./internal/fileFaults.js"
import { okPerTurn } from "./internal/okPerTurn.js"
import { quickCheck } from "./internal/pageCheck.js"
import { install, installIdOf } from "./Install.js"
import { directoryOf, lastPosition, stampDirectory } from "./Log.js"
import * as Migrations from "./Migrations.js"
import { MutationGuard } from "./MutationGuard.js"
import { OperationCatalog } from "./OperationCatalog.js"
import { type Registration, Registry } from "./Registry.js"
import { type StorageFault } from "./StorageFault.js"
import { StoreConfig } from "./StoreConfig.js"
import * as Writer from "./Writer.js"

/**
 * The store's value for one database, from the start of its activation until its scope has closed.
 * Its mutable fields are read and changed only in synchronous steps (atomic on the one JS thread).
 */
export interface OpenDatabase {
  readonly id: DatabaseId
  /** Completed once its scope has closed everything it opened: the next activation of its file waits for it. */
  readonly closed: Deferred.Deferred<void>
  /** What its activation opened: undefined until the activation succeeded. */
  activated: Activated | undefined
  /** Handed out by the cheap lease: set once activated, cleared as soon as it starts closing. */
  ready: boolean
  /** Callers holding it now (each counted once it has received it). */
  users: number
  /** When it was last entered or left: its place in the least-recently-used order. */
  lastUsed: number
  /**
   * Set once a caller has received it and counted itself in `users`. Until then the callers of its
   * activation hold it uncounted: it is never chosen for eviction.
   */
  received: boolean
  /** The RcMap reference held for all its users while it is in use or lingering (see `Databases`). */
  pin: Scope.CloseableScope | undefined
  /** Being closed for capacity (any other close is idle expiry, a fault or shutdown). */
  evicting: boolean
  /** Taken out of the RcMap while held (eviction, a fault): it is never pinned again. */
  invalidated: boolean
}

/** What an activation opened, all of it closed with the entry's scope. */
export interface Activated {
  readonly database: Database
  /** What its activation did to the installed catalog. */
  readonly installed: "installed" | "unchanged" | "updated"
  /**
   * Whether its file is still the one it opened: one stat per turn of the event loop, shared by
   * that turn's requests (see `okPerTurn`; each group commit stats it again anyway).
   */
  readonly guard: () => StorageFault | undefined
  /**
   * Gives back what its connections rebuild on next use (see `Raw.trim`), run when it goes idle.
   * A server holds many open databases, most of them idle: each keeps its handles, not its working set.
   */
  readonly trim: () => void
  /** Its compaction job, armed on the store's compaction queue (see `CompactionJob`). */
  readonly compaction: CompactionJob
  /**
   * A storage fault was found in its file: at close, the archive is not told the file is its state
   * (no sidecar), so the next activation rebuilds it from the archive instead of keeping it.
   */
  readonly distrust: () => void
}

/** A database's scheduled compaction: `run` forks its next run in the database's scope (closing it interrupts a run). */
export interface CompactionJob {
  readonly run: Effect.Effect<void>
}

/** A new entry for `id`, its activation about to start at `now` (elapsed milliseconds). */
export const make = (id: DatabaseId, now: number): OpenDatabase => ({
  id,
  closed: Deferred.unsafeMake<void>(FiberId.none),
  activated: undefined,
  ready: false,
  users: 0,
  lastUsed: now,
  received: false,
  pin: undefined,
  evicting: false,
  invalidated: false
})

/** What the store lends an opening database: where files go, and the store-wide parts it reports to. */
export interface OpenOptions {
  /** The store's `databases/` directory. */
  readonly directory: string
  /** The store's compaction queue (one fiber for every database). */
  readonly compactions: Deadlines.Deadlines<CompactionJob>
  /** A read connection opened (true) or closed (false). */
  readonly readerChanged: (open: boolean) => void
  /** A fault found while open: reported, and the database closes once its users let go. */
  readonly faulted: (error: StorageFault) => Effect.Effect<void>
  /**
   * Its archive could not take a group (see `Archive.Session.ship`): the database closes once its users
   * let go, without a fault, so its next activation rebuilds it from the archive.
   */
  readonly discard: (id: DatabaseId) => Effect.Effect<void>
}

const readSpan = hotSpan("sql.query", { attributes: { "db.system": "sqlite" } })

/**
 * A registered file, once open: intact pages, its own install id, not behind its known position.
 * The page check of a big file runs in a worker (see `quickCheck`): other databases' requests go on
 * meanwhile, this one's wait for its activation.
 */
const verify = (id: DatabaseId, filename: string, sql: SqlClient.SqlClient, registration: Registration) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const problems = yield* quickCheck(
      filename,
      Effect.map(sql.unsafe<{ readonly quick_check: string }>("PRAGMA quick_check"), (rows) => rows.map((r) => r.quick_check).filter((p) => p !== "ok"))
    )
    if (problems.length > 0) return yield* fault(id, "corrupt", `quick_check: ${problems.slice(0, 3).join("; ")}`)
    const held = yield* installIdOf(sql)
    if (Option.isNone(held)) return yield* fault(id, "foreign", "its file has no install record")
    if (held.value !== registration.install_id) {
      const owner = yield* registry.owner(held.value)
      const whose = Option.isSome(owner) ? `database ${owner.value.id}` : "an unknown database"
      return yield* fault(id, "foreign", `its file holds the install id of ${whose}`)
    }
    const position = yield* lastPosition(sql)
    if (position < registration.position) {
      return yield* fault(id, "rolled_back", `its file ends at position ${position}, but ${registration.position} was committed`)
    }
    return position
  }).pipe(Effect.catchAllCause((cause) => damaged(id, cause)))

/**
 * Opens the file of `id` in the current scope (its RcMap entry's): verified if registered, else
 * created and registered; its catalog installed, pending migrations run, its writer, lazy reader
 * and compaction job started. Everything it opens closes with that scope.
 */
export const open = (id: DatabaseId, options: OpenOptions) =>
  Effect.gen(function* () {
    const config = yield* StoreConfig
    const operations = yield* OperationCatalog
    const guard = yield* MutationGuard
    const registry = yield* Registry
    const archive = yield* Archive
    const { directory } = options
    const filename = join(directory, `${id}.sqlite`)
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    // Before the file is looked at: an archive may rebuild it (and tell the registry) first.
    const session = yield* archive.claim({ databaseId: id, directory, filename, catalog: operations.catalog, registry })
    // Added before the file is opened, so it runs once the writer has stopped and the file is closed.
    let position: Effect.Effect<number> = Effect.succeed(0)
    let trusted = true
    if (Option.isSome(session)) yield* Effect.addFinalizer(() => (trusted ? Effect.flatMap(position, session.value.closed) : Effect.void))
    const registered = yield* registry.lookup(id)
    // A new database takes a place under the deployment's limit before anything of it is created.
    let release = () => {}
    if (Option.isSome(registered)) yield* inspect(id, filename)
    else {
      release = yield* registry.reserve(config.maxDatabases)
      // A database never registered is created here (its directory too, if it was removed).
      yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))
    }
    const opened = Effect.gen(function* () {
      const connection = yield* Connection.open({ filename, cacheKib: config.sqliteCacheKib })
      yield* connection.sql.unsafe(`PRAGMA synchronous = ${config.synchronous}`)
      return connection
    })
    let connection: Connection.Opened
    let sql: SqlClient.SqlClient
    let installId: string
    if (Option.isSome(registered)) {
      const registration = registered.value
      // Verified before the catalog is installed: nothing is written to a file that is not this database's.
      connection = yield* opened.pipe(Effect.catchAllCause((cause) => damaged(id, cause)))
      sql = connection.sql
      const position = yield* verify(id, filename, sql, registration)
      if (position > registration.position) yield* registry.advance(id, position)
      installId = registration.install_id
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
      // Nor a file another data directory made (its registry lost, or copied in): its tenants' history is not this one's.
      const directoryId = yield* registry.directoryId
      const stamped = yield* directoryOf(sql).pipe(Effect.catchAll(() => Effect.succeed(undefined)))
      if (stamped !== undefined && directoryId !== undefined && stamped !== directoryId && !archive.authoritative) {
        return yield* fault(id, "foreign", "its file was made by another data directory, and this one never registered it")
      }
      installId = Option.getOrElse(held, () => crypto.randomUUID())
    }
    const installed = yield* install(sql, operations.catalog, id, now, installId)
    // The file carries the data directory's identity (a registered file is vouched for by its install id,
    // and stamped anew: a restore from another machine's backup).
    const directoryId = yield* registry.directoryId
    if (directoryId !== undefined && (yield* directoryOf(sql)) !== directoryId) yield* stampDirectory(sql, directoryId)
    if (Option.isNone(registered)) {
      // Durable before the database is handed out, so before its first commit is acknowledged.
      yield* registry.register({ id, install_id: installed.installId, created_at: now, position: yield* lastPosition(sql) })
      release()
    }
    if (Option.isSome(session)) {
      const raw = connection.raw
      yield* session.value.ready({
        outcome: installed.outcome,
        installId: installed.installId,
        position: yield* lastPosition(sql),
        // On the write connection, by whoever holds it (the activation now, the writer between groups later).
        vacuumInto: (path) => Effect.orDie(Effect.try(() => raw.statement("VACUUM INTO ?").run(path)))
      })
    }
    const identity = identityOf(filename)
    const guardFile = () => fileFault(id, filename, identity)
    // Opened after installation, so the file and its WAL exist for a read-only handle; opened only
    // when a read needs it (see `values`), and closed again once idle.
    const readConnection = yield* Connection.open({
      filename,
      readonly: true,
      cacheKib: config.sqliteCacheKib,
      lazy: { idleClose: config.readerIdleTimeout, onChange: options.readerChanged }
    })
    const values = (text: string, params: ReadonlyArray<unknown>) =>
      Connection.committedValues(connection, readConnection, text, params).pipe(
        Effect.orDie,
        // One cheap span per read statement when a tracer is configured (no captured stack, no text, never its values).
        readSpan
      )
    // Added before the writer, so it runs after the writer has stopped: the exact last position.
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
        return error === undefined ? Effect.void : Effect.zipRight(options.faulted(error), Effect.fail(error))
      }),
      // Acknowledged only once shipped (cluster mode); embedded mode has no session and ships nothing.
      ...(Option.isSome(session) ? { afterCommit: session.value.ship, onAfterCommitFailure: options.discard(id) } : {})
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
    const compact = Compaction.compact(writer, config.retainedCommits, {
      receipts: config.receiptRetention,
      commits: config.commitRetention
    }).pipe(
      Effect.tap(() => Effect.flatMap(writer.position, (p) => registry.advance(id, p)))
    )
    // Armed on the store's compaction queue, each run forked in this scope, the next armed once
    // it is done: never again once the scope has started closing.
    const compactEveryMillis = Duration.toMillis(config.compactEvery)
    const scope = yield* Effect.scope
    let armed = true
    const job: { run: Effect.Effect<void> } = { run: Effect.void }
    const rearm = Effect.flatMap(currentElapsedMillis, (now) =>
      Effect.sync(() => {
        if (armed) options.compactions.arm(job, now + compactEveryMillis)
      })
    )
    job.run = Effect.asVoid(Effect.forkIn(Effect.ensuring(Compaction.scheduled(compact, id), rearm), scope))
    yield* rearm
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        armed = false
        options.compactions.disarm(job)
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
    return {
      database,
      installed: installed.outcome,
      guard: okPerTurn(guardFile),
      trim: () => {
        connection.raw.trim()
        readConnection.raw.trim()
      },
      compaction: job,
      distrust: () => {
        trusted = false
      }
    } satisfies Activated
  })

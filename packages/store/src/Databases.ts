/**
 * Activates per-database SQLite files: one file per database key (named by a digest of the key),
 * one write connection per open file (and a read-only one while in use), kept open while in use,
 * closed when idle or when too many are open. Callers hold a database for a scope. A database the
 * `Registry` knows is verified before use and never recreated: a missing, emptied, damaged, swapped
 * or rolled-back file is a `StorageFault`.
 *
 * Each open database is one `OpenDatabase`, the value of its `RcMap` entry: its users, its shared
 * reference, its file check, trim and compaction job live and die with that entry's scope. Kept
 * here is only what spans databases: the entries by id, faults (they outlive an entry), the three
 * deadline queues. The journey of one activation (every step that reads and changes an entry is
 * synchronous: atomic on the one JS thread):
 *
 * 1. Get. `activate` / `withDatabase` refuse an id with a recorded fault at once. An entry that is
 *    `ready` (activated, not closing) and pinned is leased cheaply: `users` + 1 and one finalizer,
 *    no RcMap reference of the caller's own (step 4 keeps it open).
 * 2. Activate. Otherwise the caller takes an RcMap reference of its own (`activateSlow`). The first
 *    one runs `lookup` in a new entry's scope: it waits until the file's previous entry, if still
 *    closing, has closed (one file, one writer), registers a new `OpenDatabase`, opens the file
 *    (`OpenDatabase.open`). A failed activation is not kept: the next caller tries again.
 * 3. Receive. Each caller counts itself in `users` as soon as `RcMap.get` hands it the entry (the
 *    first one sets `received`: until then the activation's callers are not counted, and the entry
 *    is never evicted), checks the file, then takes the shared reference (`pin`) if nobody holds it.
 * 4. Lease and linger. Later callers take the cheap lease (1). When `users` drops to 0 the pin
 *    lingers `pinLinger`, re-armed by each leave on the `lingers` queue, so requests that follow each
 *    other without overlapping keep taking the cheap lease.
 * 5. Idle. A linger that passes unused trims the connections and arms `idles` for `idleTimeout`
 *    later; a use in between disarms it (back to 4).
 * 6. Idle close. At that deadline, still unused, the pin is released. With no other RcMap reference
 *    the RcMap closes the entry's scope: its first finalizer clears `ready` (no more cheap leases),
 *    then the writer, reader and file close, and its last one takes it out of `entries`, counts the
 *    close and completes `closed` (which a waiting `lookup` of step 2 awaits).
 * 7. Eviction. After each activation and each last leave, while more than `maxOpenDatabases` are
 *    open, the least recently used received entries without users are marked `evicting`, taken out
 *    of the RcMap and unpinned: each closes as in 6 once its last holder lets go ("capacity"). A
 *    storage fault takes its entry out the same way (`faulted`); its id stays refused (1) until an
 *    operator clears it (`clearFault`, `cairn doctor --clear-fault`) or restores the database.
 * 8. Hold. An operator's action on one file (an online restore, see `DatabaseAdmin`) holds its id
 *    (`hold`): new calls are refused at once, retryably, the entry closes once its users let go, and
 *    the id is taken again when the action's scope closes. Every other database keeps serving.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Cause, Data, Deferred, Duration, Effect, Exit, FiberRef, HashMap, Metric, MetricBoundaries, Option, Predicate, RcMap, Scope } from "effect"
import { Digest } from "@cairn/catalog"
import { DatabaseId, type DatabaseKey } from "@cairn/domain/Ids"
import { currentElapsedMillis, elapsedMillis } from "@cairn/domain/Elapsed"
import { hotSpan } from "@cairn/domain/HotSpan"
import { Archive } from "./Archive.js"
import { type Database } from "./Database.js"
import * as DataDirectory from "./DataDirectory.js"
import * as Deadlines from "./internal/deadlines.js"
import { fault } from "./internal/fileFaults.js"
import * as OpenDatabase from "./OpenDatabase.js"
import { type DatabaseLimitReached, Registry } from "./Registry.js"
import { countWriteFault, type FaultKind, StorageFault, storageFaults } from "./StorageFault.js"
import { StoreConfig } from "./StoreConfig.js"

export type { Database } from "./Database.js"

/**
 * Operator-facing: a database could not be opened or its catalog installed. Its message
 * names the internal id: log it, never show it to a caller.
 */
export class ActivationError extends Data.TaggedError("ActivationError")<{
  readonly databaseId: DatabaseId
  readonly cause: unknown
  /** Set when the file is faulted (see `StorageFault`): nothing was recreated or overwritten. */
  readonly fault?: FaultKind | undefined
  /** Set while an operator's action holds the database (see `Databases.hold`): retry shortly. */
  readonly held?: string | undefined
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Database ${this.databaseId} could not be activated: ${reason}`
  }
  /**
   * What the caller may be told, when the refusal is the deployment's rule rather than a failure (the
   * database limit); undefined otherwise (a failure is logged and answered by reference).
   */
  get publicMessage(): string | undefined {
    const cause = this.cause as { readonly _tag?: unknown; readonly publicMessage?: unknown } | undefined
    return cause?._tag === "DatabaseLimitReached" && typeof cause.publicMessage === "string" ? cause.publicMessage : undefined
  }
}

/** Hot-path spans, made only when a tracer is configured (see `@cairn/domain/HotSpan`). */
const activateSpan = hotSpan("Databases.activate")

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

/** What this process knows of one database right now (see `Databases.state`). */
export interface DatabaseState {
  /** Activated here and not closed. */
  readonly open: boolean
  /** Calls holding it now. */
  readonly users: number
  /** The storage fault refusing it, if any (kept until cleared or restored). */
  readonly fault?: StorageFault | undefined
  /** Why an operator's action holds it, if one does. */
  readonly held?: string | undefined
}

/** What `Databases` holds for databases (see `Databases.tracked`): counts, for tests. */
export interface Tracked {
  /** Entries by id: activating, open or closing. */
  readonly entries: number
  /** Armed lingers (a last user left less than `pinLinger` ago). */
  readonly lingers: number
  /** Armed idle closes. */
  readonly idles: number
  /** Armed compaction jobs (one per open database). */
  readonly compactions: number
}

/** An entry handed out: its activation succeeded. */
type Active = OpenDatabase.OpenDatabase & { readonly activated: OpenDatabase.Activated }

const isActive = (entry: OpenDatabase.OpenDatabase): entry is Active => entry.activated !== undefined

export class Databases extends Effect.Service<Databases>()("@cairn/store/Databases", {
  scoped: Effect.gen(function* () {
    const config = yield* StoreConfig
    // Before any database opens: a used data directory whose registry was lost refuses to start.
    yield* DataDirectory.verify
    const { authoritative } = yield* Archive
    const reactivity = yield* Reactivity.make
    const directory = join(config.dataDir, "databases")
    yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))

    /** Every database with an entry (activating, open or closing), by id: at most one per file (see `lookup`). */
    const entries = new Map<DatabaseId, OpenDatabase.OpenDatabase>()
    /** Entries activated and not closed yet, and those of them being evicted. */
    let open = 0
    let evicting = 0
    let shuttingDown = false
    /** Read connections open now (each database opens its own on demand). */
    let readers = 0
    const readerChanged = (opened: boolean) => {
      readers += opened ? 1 : -1
      openReaders.unsafeUpdate(readers, [])
    }
    const gauge = Effect.suspend(() => Metric.set(openDatabases, open))
    /**
     * Storage faults found by this process. A faulted database stays refused until the operator
     * clears the fault (`clearFault`, once its file is repaired) or restores it online. Not when
     * an archive is the database (`Archive.authoritative`, cluster mode): the local file is a cache,
     * so the faulted database closes and its next activation rebuilds the file from the archive.
     */
    const faults = new Map<DatabaseId, StorageFault>()

    /** Logged and counted once per database, whoever finds it (activation, a commit, a check). */
    const report = (error: StorageFault) =>
      Effect.suspend(() => {
        const id = error.databaseId as DatabaseId
        if (authoritative) {
          // Its file is never again taken for the archive's state (see `OpenDatabase.Activated.distrust`).
          entries.get(id)?.activated?.distrust()
          return Effect.zipRight(
            Metric.increment(Metric.tagged(storageFaults, "kind", error.kind)),
            Effect.logError("storage fault; the database closes and its next activation rebuilds it from the archive", error.message).pipe(
              Effect.annotateLogs({ database: id, fault: error.kind })
            )
          )
        }
        if (faults.has(id)) return Effect.void
        // Kept until cleared with its stack as text: its captured frames would keep what they ran in
        // (the closed database's closures and objects) alive as long.
        void error.stack
        faults.set(id, error)
        return Effect.zipRight(
          Metric.increment(Metric.tagged(storageFaults, "kind", error.kind)),
          Effect.logError("storage fault", error.message).pipe(Effect.annotateLogs({ database: id, fault: error.kind }))
        )
      })

    /** Opens one database in the RcMap entry's scope; everything it opened closes with that scope. */
    const lookup = (id: DatabaseId) =>
      Effect.gen(function* () {
        const clock = yield* Effect.clock
        // One file, one writer: a new activation of a file waits until its previous entry has closed.
        for (;;) {
          const previous = entries.get(id)
          if (previous === undefined) break
          yield* Deferred.await(previous.closed)
        }
        const entry = OpenDatabase.make(id, elapsedMillis(clock))
        entries.set(id, entry)
        // Added first, so it runs last: after the writer, the reader and the file are closed.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            if (entries.get(id) === entry) entries.delete(id)
            entry.ready = false
            lingers.disarm(entry)
            idles.disarm(entry)
            const reason: CloseReason = shuttingDown ? "shutdown" : entry.evicting ? "capacity" : "idle"
            if (entry.evicting) evicting -= 1
            if (entry.activated !== undefined) {
              open -= 1
              yield* Metric.increment(Metric.tagged(evictions, "reason", reason))
              yield* gauge
              // Closed from whichever fiber let it go (an idle timer, a release): none of its request's annotations.
              yield* Effect.logInfo("database closed").pipe(
                Effect.annotateLogs({ database: id, reason }),
                Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty())
              )
            }
            yield* Deferred.succeed(entry.closed, undefined)
          })
        )
        const opening = elapsedMillis(clock)
        const activated = yield* OpenDatabase.open(id, { directory, compactions, readerChanged, faulted, discard }).pipe(
          Effect.provideService(Reactivity.Reactivity, reactivity),
          Effect.catchAllCause((cause) => {
            const failure = Cause.failureOption(cause)
            if (Option.isSome(failure) && Predicate.isTagged(failure.value, "DatabaseLimitReached")) {
              // The operator's limit, not a failure: one warning, nothing created, nothing counted as a fault.
              const error = failure.value as DatabaseLimitReached
              return Effect.zipRight(
                Effect.logWarning("database limit reached; a new database was refused", error.message).pipe(Effect.annotateLogs({ database: id })),
                Effect.fail(new ActivationError({ databaseId: id, cause: error }))
              )
            }
            if (Option.isSome(failure) && Predicate.isTagged(failure.value, "StorageFault")) {
              const error = failure.value
              return Effect.zipRight(report(error), Effect.fail(new ActivationError({ databaseId: id, cause: error, fault: error.kind })))
            }
            return Effect.zipRight(
              Effect.zipRight(countWriteFault(cause), Effect.logError("database activation failed", cause).pipe(Effect.annotateLogs({ database: id }))),
              Effect.fail(new ActivationError({ databaseId: id, cause: Cause.squash(cause) }))
            )
          })
        )
        entry.activated = activated
        entry.ready = true
        open += 1
        // The first finalizer the scope runs (before the writer stops): no more cheap leases.
        yield* Effect.addFinalizer(() => Effect.sync(() => (entry.ready = false)))
        yield* Metric.increment(activations)
        yield* Metric.update(activationLatency, elapsedMillis(clock) - opening)
        yield* gauge
        yield* Effect.logInfo("database activated").pipe(Effect.annotateLogs({ database: id, catalog: activated.installed }))
        return entry as Active
      })

    // RcMap's own `capacity` refuses a new key when full; ours closes the least recently
    // used idle databases instead and lets in-use ones exceed it, so it is enforced below.
    // No idle time of its own (a fiber per idle database): the shared reference is held until the
    // database has been unused for `idleTimeout` (see `idles`), and the last reference closes it.
    const databases = yield* RcMap.make({ lookup })
    /** How long an unused database keeps its shared reference (see `pin`): a second, or less than the idle timeout. */
    const pinLinger = Duration.min(Duration.seconds(1), config.idleTimeout)
    const lingerMillis = Duration.toMillis(pinLinger)
    const idleMillis = Duration.toMillis(config.idleTimeout)

    // The store's timers, one fiber each whatever the number of open databases. Made after the
    // RcMap, so they are interrupted before it closes every database.
    /**
     * A database whose last user left `pinLinger` ago (each `leave` re-arms it): idle now, its
     * connections give back what they rebuild on next use; it closes `idleTimeout` later unless used.
     */
    const lingers = yield* Deadlines.make((entry: OpenDatabase.OpenDatabase) =>
      Effect.flatMap(currentElapsedMillis, (now) => {
        // Closing, or in use again: its users' last `leave` arms the next linger.
        if (entry.pin === undefined || entry.users > 0) return Effect.void
        entry.activated?.trim()
        if (Number.isFinite(idleMillis)) idles.arm(entry, now + idleMillis)
        return Effect.void
      })
    )
    /** A database unused for `pinLinger` and then `idleTimeout`: its shared reference goes, and it closes. */
    const idles = yield* Deadlines.make((entry: OpenDatabase.OpenDatabase) =>
      Effect.suspend(() => (entry.users > 0 ? Effect.void : releasePin(entry)))
    )
    /** Each open database's next compaction (see `OpenDatabase.open`). */
    const compactions = yield* Deadlines.make((job: OpenDatabase.CompactionJob) => job.run)

    /** A fault found in an open database: reported, and the database closes once its users let go. */
    const faulted = (error: StorageFault) =>
      Effect.zipRight(
        report(error),
        // Forked: the writer's own fiber may find it, and closing the database waits for that fiber.
        Effect.forkDaemon(
          Effect.suspend(() => {
            const id = error.databaseId as DatabaseId
            const entry = entries.get(id)
            if (entry !== undefined) entry.invalidated = true
            // A lingering shared reference is nobody's: it does not keep a faulted database open.
            return Effect.zipRight(RcMap.invalidate(databases, id), entry !== undefined && entry.users === 0 ? releasePin(entry) : Effect.void)
          })
        )
      )

    /**
     * An open database whose archive refused a group: no more leases, out of the RcMap, closed once its
     * users let go. Not a fault: its next activation rebuilds it from the archive.
     */
    const discard = (id: DatabaseId): Effect.Effect<void> =>
      // Forked: the writer's own fiber tells it, and closing the database waits for that fiber.
      Effect.asVoid(
        Effect.forkDaemon(
          Effect.suspend(() => {
            const entry = entries.get(id)
            if (entry === undefined) return Effect.void
            entry.ready = false
            entry.invalidated = true
            return Effect.zipRight(RcMap.invalidate(databases, id), entry.users === 0 ? releasePin(entry) : Effect.void)
          })
        )
      )

    const refuse = (id: DatabaseId, error: StorageFault) => new ActivationError({ databaseId: id, cause: error, fault: error.kind })
    /** Databases an operator's action holds (see `hold`), and why. */
    const held = new Map<DatabaseId, string>()
    const refuseHeld = (id: DatabaseId, reason: string) =>
      new ActivationError({ databaseId: id, cause: `the database is ${reason} by an operator`, held: reason })
    // Added after the RcMap, so it runs before the RcMap closes every database.
    yield* Effect.addFinalizer(() => Effect.sync(() => (shuttingDown = true)))

    /** Closes the least recently used idle databases while more than `maxOpenDatabases` are open. */
    const evictOverCapacity = Effect.suspend(() => {
      const excess = open - evicting - config.maxOpenDatabases
      if (excess <= 0) return Effect.void
      const victims: Array<OpenDatabase.OpenDatabase> = []
      for (const entry of entries.values()) {
        if (entry.activated !== undefined && entry.received && !entry.evicting && entry.users === 0) victims.push(entry)
      }
      victims.sort((a, b) => a.lastUsed - b.lastUsed)
      victims.length = Math.min(victims.length, excess)
      for (const entry of victims) {
        entry.evicting = true
        entry.invalidated = true
        evicting += 1
      }
      // Out of the map first (unless already closing, out of it), so letting go of a lingering shared reference closes it at once.
      return Effect.forEach(
        victims,
        (entry) => Effect.zipRight(entry.ready ? RcMap.invalidate(databases, entry.id) : Effect.void, releasePin(entry)),
        { discard: true }
      )
    })

    const enter = (entry: OpenDatabase.OpenDatabase, now: number) => {
      entry.users += 1
      entry.lastUsed = now
    }

    /** One user of `entry` left at `now`. */
    const leave = (entry: OpenDatabase.OpenDatabase, now: number): Effect.Effect<void> => {
      entry.users -= 1
      entry.lastUsed = now
      if (entry.users > 0) return Effect.void
      // Taken out of the RcMap (a fault, a discard): nothing of it lingers, its next activation waits for it.
      if (entry.invalidated) return releasePin(entry)
      // The last user left: the shared reference lingers (see `pin`) unless nothing may linger; then capacity.
      return Effect.zipRight(lingerMillis === 0 ? releasePin(entry) : linger(entry, now), evictOverCapacity)
    }

    const unuse = (entry: OpenDatabase.OpenDatabase) => Effect.flatMap(currentElapsedMillis, (now) => Effect.suspend(() => leave(entry, now)))

    /** Drops the shared reference of `entry`, if held: with no other reference, the RcMap closes it. */
    const releasePin = (entry: OpenDatabase.OpenDatabase) =>
      Effect.suspend(() => {
        const pin = entry.pin
        if (pin === undefined) return Effect.void
        entry.pin = undefined
        return Scope.close(pin, Exit.void)
      })

    /** Starts (again) the linger of a database whose last user just left at `now`. */
    const linger = (entry: OpenDatabase.OpenDatabase, now: number) =>
      Effect.sync(() => {
        if (entry.pin === undefined) return
        idles.disarm(entry)
        lingers.arm(entry, now + lingerMillis)
      })

    /**
     * Takes the shared reference of a database in use (by the calling activation, so `users` > 0):
     * one RcMap reference held for all of its users, so that a caller arriving meanwhile takes the
     * cheap lease (a counter) instead of an RcMap reference of its own. Never for an entry taken
     * out of the RcMap (evicted or faulted): a new reference would be a new activation of its file,
     * waiting for this one to close under its own caller.
     */
    const pin = (entry: Active) =>
      Effect.suspend(() => {
        if (entry.pin !== undefined || entry.invalidated || faults.has(entry.id)) return Effect.void
        return Effect.flatMap(Scope.make(), (scope) =>
          Effect.flatMap(Effect.exit(Scope.extend(RcMap.get(databases, entry.id), scope)), (exit) => {
            if (Exit.isFailure(exit) || exit.value !== entry || entry.pin !== undefined || entry.users === 0) return Scope.close(scope, Exit.void)
            entry.pin = scope
            return Effect.void
          })
        )
      })

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
    const checked = (entry: Active): Effect.Effect<Database, ActivationError> =>
      Effect.suspend(() => {
        const error = entry.activated.guard()
        return error === undefined ? Effect.succeed(entry.activated.database) : Effect.zipRight(faulted(error), Effect.fail(refuse(entry.id, error)))
      })

    /** The first activation of a database by current users: an RcMap reference of its own, then the shared one. */
    const activateSlow = (id: DatabaseId) =>
      Effect.gen(function* () {
        const entry = yield* Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(
            // A failed activation is not kept: the next caller tries again.
            restore(RcMap.get(databases, id)).pipe(Effect.tapError(() => RcMap.invalidate(databases, id))),
            // Counted as soon as received (see `received`), and until its RcMap reference is dropped.
            (entry) =>
              Effect.flatMap(currentElapsedMillis, (now) => {
                enter(entry, now)
                entry.received = true
                return Effect.as(Effect.addFinalizer(() => unuse(entry)), entry)
              })
          )
        )
        const database = yield* checked(entry)
        yield* pin(entry)
        yield* evictOverCapacity
        return database
      })

    /**
     * The open database of an id that has users or lingers, if any: taken with a counter and one
     * finalizer (the shared RcMap reference keeps it open), not a reference of its own.
     */
    const leaseOpen = (id: DatabaseId, now: number): Active | undefined => {
      const entry = entries.get(id)
      if (entry === undefined || !entry.ready || entry.pin === undefined || shuttingDown || !isActive(entry)) return undefined
      enter(entry, now)
      return entry
    }

    /**
     * The database of `databaseKey`, created and laid out on first use. It stays open
     * (never closed under its users) until the caller's scope closes.
     */
    const activate = (databaseKey: DatabaseKey): Effect.Effect<Database, ActivationError, Scope.Scope> =>
      Effect.suspend((): Effect.Effect<Database, ActivationError, Scope.Scope> => {
        const id = idOf(databaseKey)
        const known = faults.get(id)
        if (known) return Effect.fail(refuse(id, known))
        const holding = held.get(id)
        if (holding !== undefined) return Effect.fail(refuseHeld(id, holding))
        return Effect.clockWith((clock) => Effect.uninterruptibleMask((restore) => {
          const entry = leaseOpen(id, elapsedMillis(clock))
          if (entry === undefined) return restore(activateSlow(id))
          return Effect.zipRight(
            Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, unuse(entry))),
            restore(checked(entry))
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
        const holding = held.get(id)
        if (holding !== undefined) return Effect.fail(refuseHeld(id, holding))
        return Effect.clockWith((clock) => Effect.uninterruptibleMask((restore) => {
          const entry = leaseOpen(id, elapsedMillis(clock))
          if (entry === undefined) return restore(Effect.scoped(Effect.flatMap(activate(databaseKey), f)))
          return Effect.ensuring(
            restore(Effect.flatMap(checked(entry).pipe(activateSpan), f)),
            // `unuse(entry)` with the clock at hand.
            Effect.suspend(() => leave(entry, elapsedMillis(clock)))
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

    /**
     * Closes database `id` here as `close` does, and waits until it has closed (its users let go
     * first, its writer stopped, its file closed): an operator's action on its file (an online
     * restore, a move) starts only then. Answers whether it was open.
     */
    const release = (id: DatabaseId): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const entry = entries.get(id)
        if (entry === undefined) return Effect.succeed(false)
        return Effect.zipRight(discard(id), Effect.as(Deferred.await(entry.closed), entry.activated !== undefined))
      })

    /**
     * Holds database `id` for an operator's action for the current scope: new calls are refused
     * (`ActivationError` with `held`, a retryable 503), it closes here once its users let go, and
     * this answers once it has closed (whether it was open). Refused when another action holds it.
     */
    const hold = (id: DatabaseId, reason: string): Effect.Effect<boolean, ActivationError, Scope.Scope> =>
      Effect.uninterruptible(
        Effect.suspend(() => {
          const holding = held.get(id)
          if (holding !== undefined) return Effect.fail(refuseHeld(id, holding))
          held.set(id, reason)
          return Effect.zipRight(Effect.addFinalizer(() => Effect.sync(() => held.delete(id))), release(id))
        })
      )

    /** Forgets the fault of database `id` (its file repaired): its next call checks the file again. Answers the fault cleared. */
    const clearFault = (id: DatabaseId): Effect.Effect<StorageFault | undefined> =>
      Effect.sync(() => {
        const known = faults.get(id)
        faults.delete(id)
        return known
      })

    /**
     * Opens database `id` as a call would (every check of its file), then lets it go: whether it
     * serves now. A fault it finds is recorded as any other (`report`).
     */
    const probe = (id: DatabaseId): Effect.Effect<void, ActivationError> =>
      Effect.suspend(() => {
        const known = faults.get(id)
        if (known) return Effect.fail(refuse(id, known))
        const holding = held.get(id)
        if (holding !== undefined) return Effect.fail(refuseHeld(id, holding))
        return Effect.scoped(Effect.asVoid(activateSlow(id)))
      })

    /** What this process knows of database `id` now. */
    const state = (id: DatabaseId): Effect.Effect<DatabaseState> =>
      Effect.sync(() => {
        const entry = entries.get(id)
        return { open: entry?.activated !== undefined, users: entry?.users ?? 0, fault: faults.get(id), held: held.get(id) }
      })

    return {
      activate,
      withDatabase,
      release,
      hold,
      clearFault,
      probe,
      state,
      /** Records a fault an operator's check found (`DatabaseAdmin.check`): refused until cleared; closed once its users let go. */
      faulted,
      /** Ids with a recorded fault. */
      faulty: Effect.sync(() => [...faults.keys()]),
      /**
       * Closes database `id` here once its users let go, as idle expiry would, without a fault: its
       * owner moved to another process (a cluster entity stopped here). Its next activation claims it again.
       */
      close: discard,
      check,
      /** Opaque ids of the open databases (for health and tests). */
      open: Effect.sync(() => {
        const opened: Array<DatabaseId> = []
        for (const entry of entries.values()) if (entry.activated !== undefined) opened.push(entry.id)
        return opened
      }),
      /**
       * What the store holds for databases (for tests): once a database has closed, none of it is its
       * (its entry gone, none of its deadlines armed); only a fault it had stays, refusing its id.
       */
      tracked: Effect.sync((): Tracked => ({
        entries: entries.size,
        lingers: lingers.size(),
        idles: idles.size(),
        compactions: compactions.size()
      }))
    } as const
  }),
  // The registry is the data directory's lock: every assembly of the store takes it.
  dependencies: [Registry.Default]
}) {}

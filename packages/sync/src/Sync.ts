/**
 * The sync engine every transport calls with a verified principal, its view and its
 * database: snapshot pages of a scope, then the changes after a cursor, filtered
 * through the principal's policy, caught up and then live until the caller stops.
 */
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { CatalogChanged, InvalidQuery, type PublicError, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type ChangesRequest, resnapshot, type ResnapshotReason, type SnapshotPage, type SnapshotRequest, type SyncMessage, type SyncRecord } from "@cairn/domain/Sync"
import { type Principal } from "@cairn/domain/Principal"
import type { RecordValue } from "@cairn/policy/Evaluate"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { Log } from "@cairn/store"
import { type Database } from "@cairn/store/Databases"
import { Deferred, Effect, Fiber, FiberId, Metric, Option, Stream } from "effect"
import { narrowingOf, replay, type ReplayResult, stateAtStart } from "./internal/replay.js"
import type { Narrowing } from "./internal/rows.js"
import { type ResolvedScope, resolveScope, strip } from "./internal/scope.js"
import { readPage } from "./internal/snapshot.js"
import { SyncConfig } from "./SyncConfig.js"
import * as SyncCursor from "./SyncCursor.js"
import * as SyncMetrics from "./SyncMetrics.js"

const restartSnapshot = (why: string) =>
  new InvalidQuery({ message: `${why} Start the snapshot again without "after".` })

export class Sync extends Effect.Service<Sync>()("@cairn/sync/Sync", {
  effect: Effect.gen(function* () {
    const sealer = yield* Sealer
    const config = yield* SyncConfig
    const limits = yield* QueryLimits
    /**
     * Lookup answers per database and state (last committed position): every live stream
     * of a database replays the same commit against the same state, so they share reads.
     */
    const lookupCaches = new Map<string, Map<number, Map<string, ReadonlyArray<RecordValue>>>>()
    const lookupCache = (database: Database, position: number) => {
      let byPosition = lookupCaches.get(database.id)
      if (!byPosition) {
        lookupCaches.set(database.id, (byPosition = new Map()))
        // Bounded: the databases streamed most recently (Map order is insertion order).
        if (lookupCaches.size > 256) lookupCaches.delete(lookupCaches.keys().next().value!)
      }
      let cache = byPosition.get(position)
      if (!cache) {
        byPosition.set(position, (cache = new Map()))
        // Keep only the newest few states: streams read the latest one.
        for (const old of [...byPosition.keys()].sort((a, b) => a - b).slice(0, -4)) byPosition.delete(old)
      }
      return cache
    }

    const bindingOf = (principal: Principal, view: View, database: Database, scope: ResolvedScope) =>
      Effect.map(
        database.reader.unsafe<{ readonly installed_at: string }>(`SELECT installed_at FROM ${Log.installTable} WHERE id = 1`),
        (found): SyncCursor.Binding => ({
          subject: principal.subject,
          database: SyncCursor.databaseDigest(principal.databaseKey, found[0]?.installed_at ?? ""),
          scope: scope.scopeDigest,
          access: scope.accessDigest,
          catalogToken: view.token
        })
      )

    /**
     * One watcher of each database's committed position for all its live streams: each
     * commit completes the current latch and installs a fresh one, so a thousand waiting
     * streams cost one subscription, not a thousand.
     */
    interface Signal {
      position: number
      latch: Deferred.Deferred<void>
      users: number
      watcher: Fiber.RuntimeFiber<void> | undefined
    }
    const signals = new Map<string, Signal>()
    const signalLock = yield* Effect.makeSemaphore(1)
    const acquireSignal = (database: Database) =>
      signalLock.withPermits(1)(
        Effect.gen(function* () {
          const existing = signals.get(database.id)
          if (existing) {
            existing.users += 1
            return existing
          }
          const signal: Signal = {
            position: yield* database.committed.get,
            latch: yield* Deferred.make<void>(),
            users: 1,
            watcher: undefined
          }
          signal.watcher = yield* database.committed.changes.pipe(
            Stream.runForEach((position) =>
              Effect.suspend(() => {
                signal.position = position
                const fired = signal.latch
                signal.latch = Deferred.unsafeMake(FiberId.none)
                return Deferred.succeed(fired, undefined)
              })
            ),
            // Acquisition is uninterruptible and a fork inherits that; the watcher must stay stoppable.
            Effect.interruptible,
            Effect.forkDaemon
          )
          signals.set(database.id, signal)
          return signal
        })
      )
    const releaseSignal = (database: Database, signal: Signal) =>
      signalLock.withPermits(1)(
        Effect.suspend(() => {
          signal.users -= 1
          if (signal.users > 0 || signal.watcher === undefined) return Effect.void
          signals.delete(database.id)
          lookupCaches.delete(database.id)
          replayed.delete(database.id)
          return Fiber.interrupt(signal.watcher)
        })
      )
    /** Waits (for the life of the scope) until `database` commits past a position. */
    const commitSignal = (database: Database) =>
      Effect.map(
        Effect.acquireRelease(acquireSignal(database), (signal) => releaseSignal(database, signal)),
        (signal) => {
          const waitBeyond = (position: number): Effect.Effect<void> =>
            Effect.suspend(() =>
              signal.position > position ? Effect.void : Effect.zipRight(Deferred.await(signal.latch), waitBeyond(position))
            )
          return waitBeyond
        }
      )

    /** One page of a snapshot of `request.scope`, as the principal may see it. */
    // A span without a captured stack: every snapshot page passes here.
    const snapshot = (principal: Principal, view: View, database: Database, request: SnapshotRequest) =>
      Effect.withSpan(snapshotBody(principal, view, database, request), "Sync.snapshot", { captureStackTrace: false })

    const snapshotBody = Effect.fnUntraced(function* (
      principal: Principal,
      view: View,
      database: Database,
      request: SnapshotRequest
    ) {
      // `request.ifCatalog` was checked by the engine (`DataPlane`) before the database was opened.
      const scope = yield* resolveScope(view, request.scope, limits)
      const binding = yield* Effect.orDie(bindingOf(principal, view, database, scope))
      let continuation: SyncCursor.Continuation | undefined
      if (request.after !== undefined) {
        continuation = SyncCursor.openContinuation(sealer, request.after)
        if (continuation === undefined || SyncCursor.mismatch(continuation, binding, (token) => view.admits(token, scope.entries.map((e) => CatalogVersion.entity(e.entity.name)))) !== undefined) {
          return yield* restartSnapshot("This snapshot continuation is not valid for this caller, scope or catalog.")
        }
        if (continuation.entry >= scope.entries.length) return yield* restartSnapshot("This snapshot continuation is not valid.")
      }
      const reader = database.reader
      const page = yield* Effect.orDie(
        reader.withTransaction(
          Effect.gen(function* () {
            const start = continuation ? continuation.start : yield* Log.lastPosition(reader)
            // A later page reads a later state than the snapshot's start (its checkpoint, where
            // replay resumes): the rows committed since are sent as they were at the start, else
            // the client would keep a record that appeared and left its view between the two
            // (replay decides each record from its state at the start, not from what a page sent).
            const last = continuation ? yield* Log.lastPosition(reader) : start
            let since: ReadonlyArray<Log.Commit> = []
            if (last > start) {
              if (last - start > config.maxReplayCommits || start < (yield* Log.watermark(reader))) return undefined
              since = yield* Log.commitsAfter(reader, start, last - start)
            }
            const narrowing = since.length > 0 ? narrowingOf(view.catalog, scope) : undefined
            let entry = continuation?.entry ?? 0
            let after = continuation?.after ?? null
            const records: Array<SyncRecord> = []
            let bytes = 0
            while (entry < scope.entries.length && records.length < config.pageRows && bytes < config.pageBytes) {
              const scopeEntry = scope.entries[entry]!
              const part = yield* readPage({
                catalog: view.catalog,
                reader,
                entry: scopeEntry,
                after,
                maxRecords: config.pageRows - records.length,
                maxBytes: config.pageBytes - bytes
              })
              if (since.length > 0) {
                // This part covers the ids after `after` up to its last id (to the end when exhausted).
                const lower = after
                const upper = part.exhausted ? null : part.last
                const covers = (id: string) => (lower === null || id > lower) && (upper === null || id <= upper)
                const atStart = yield* stateAtStart({ catalog: view.catalog, entry: scopeEntry, reader, commits: since, covers, ...(narrowing ? { narrowing } : {}) })
                if (atStart.touched.size > 0) {
                  const kept = part.records.filter((r) => !atStart.touched.has(r.id))
                  for (const image of atStart.visible) {
                    kept.push({ entity: scopeEntry.entity.name, id: image["id"] as string, record: strip(scopeEntry, image) })
                  }
                  kept.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
                  records.push(...kept)
                } else records.push(...part.records)
              } else records.push(...part.records)
              bytes += part.bytes
              if (!part.exhausted) {
                after = part.last
                break
              }
              entry += 1
              after = null
            }
            return { start, entry, after, records, bytes }
          })
        )
      )
      if (page === undefined) return yield* restartSnapshot("The log moved too far past this snapshot's start.")
      const sent = (continuation?.sent ?? 0) + page.records.length
      if (sent > config.maxSnapshotRows) {
        return yield* new QueryBudgetExceeded({
          message: `This sync scope holds more than ${config.maxSnapshotRows} records. Narrow it with where filters or fewer entities.`,
          limit: "snapshot size"
        })
      }
      yield* Metric.increment(SyncMetrics.snapshotPages)
      yield* Metric.update(SyncMetrics.snapshotPageBytes, page.bytes)
      if (page.entry >= scope.entries.length) {
        yield* Metric.update(SyncMetrics.snapshotRecords, sent)
        const result: SnapshotPage = {
          records: page.records,
          checkpoint: SyncCursor.checkpoint(sealer, { ...binding, position: page.start })
        }
        return result
      }
      const result: SnapshotPage = {
        records: page.records,
        next: SyncCursor.sealContinuation(sealer, {
          ...binding,
          start: page.start,
          entry: page.entry,
          after: page.after,
          sent
        })
      }
      return result
    })

    interface Step {
      readonly message: SyncMessage
      readonly position: number
      /** Commit time of the newest commit replayed, for the lag metric. */
      readonly newest: string | undefined
    }

    /**
     * Replayed commit ranges per database, shared by its streams: the changes after one position
     * up to `last`, for one catalog, scope and access (a stream's view of the range is a function
     * of exactly these and of the database's state at `last`). The first stream of a kind to
     * read a range after a commit replays it; the others take its answer.
     */
    interface Replayed {
      readonly result: ReplayResult
      readonly newest: string | undefined
    }
    const replayed = new Map<string, Map<string, Replayed>>()
    const replayKey = (view: View, scope: ResolvedScope, position: number, last: number) =>
      `${position}|${last}|${view.token}|${scope.scopeDigest}|${scope.accessDigest}`
    const remember = (database: Database, key: string, value: Replayed) => {
      let byKey = replayed.get(database.id)
      if (!byKey) {
        replayed.set(database.id, (byKey = new Map()))
        if (replayed.size > 256) replayed.delete(replayed.keys().next().value!)
      }
      // Bounded: the newest ranges (Map order is insertion order).
      if (byKey.size >= 256) byKey.delete(byKey.keys().next().value!)
      byKey.set(key, value)
    }
    /** The last position and the compaction watermark, read in one statement (one snapshot). */
    const tipSql = `SELECT (SELECT coalesce(max(position), 0) FROM ${Log.commitsTable}), (SELECT coalesce(max(watermark), 0) FROM ${Log.compactionTable})`

    /** Everything after `position` up to now, as one batch or a resnapshot, read in one transaction. */
    const batch = (
      view: View,
      database: Database,
      scope: ResolvedScope,
      narrowing: Narrowing,
      binding: SyncCursor.Binding,
      position: number
    ) => {
      const reader = database.reader
      const refuse = (reason: ResnapshotReason): Step => ({ message: resnapshot(reason), position, newest: undefined })
      const checked = (last: number, watermark: number): Step | undefined =>
        position < watermark
          ? refuse("history_compacted")
          : position > last
            ? refuse("cursor_mismatch")
            : last - position > config.maxReplayCommits
              ? refuse("history_compacted")
              : undefined
      const stepOf = (last: number, { newest, result }: Replayed): Step =>
        result._tag === "AccessChanged"
          ? refuse("access_changed")
          : {
              message: { _tag: "SyncBatch", changes: result.changes, checkpoint: SyncCursor.checkpoint(sealer, { ...binding, position: last }) },
              position: last,
              newest
            }
      const replayInTransaction = Effect.orDie(
        reader.withTransaction(
          Effect.gen(function* () {
            const last = yield* Log.lastPosition(reader)
            const watermark = yield* Log.watermark(reader)
            const refused = checked(last, watermark)
            if (refused !== undefined) return refused
            const commits = last === position ? [] : yield* Log.commitsAfter(reader, position, last - position)
            const result = yield* replay({
              catalog: view.catalog,
              scope,
              reader,
              commits,
              maxDependents: config.maxDependents,
              cache: lookupCache(database, last),
              narrowing
            })
            const value: Replayed = { result, newest: commits.length > 0 ? commits[commits.length - 1]!.committedAt : undefined }
            remember(database, replayKey(view, scope, position, last), value)
            return stepOf(last, value)
          })
        )
      )
      // One statement first: when another stream of the same kind already replayed this range, its answer is ours.
      return Effect.flatMap(database.values(tipSql, []), (rows) => {
        const last = Number(rows[0]?.[0] ?? 0)
        const watermark = Number(rows[0]?.[1] ?? 0)
        const refused = checked(last, watermark)
        if (refused !== undefined) return Effect.succeed(refused)
        const shared = replayed.get(database.id)?.get(replayKey(view, scope, position, last))
        return shared !== undefined ? Effect.succeed(stepOf(last, shared)) : replayInTransaction
      })
    }

    /**
     * The changes after `request.cursor`: a resnapshot instruction when the cursor cannot
     * be resumed, else batches (each ending with a new checkpoint), live until the
     * caller disconnects unless `live` is false.
     */
    const changes = (
      principal: Principal,
      view: View,
      database: Database,
      request: ChangesRequest
    ): Stream.Stream<SyncMessage, PublicError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const scope = yield* resolveScope(view, request.scope, limits)
          const binding = yield* Effect.orDie(bindingOf(principal, view, database, scope))
          const cursor = SyncCursor.openCursor(sealer, request.cursor)
          // A cursor survives a catalog change unless a definition of its scope changed incompatibly.
          const reason = SyncCursor.mismatch(cursor, binding, (token) =>
            view.admits(token, scope.entries.map((e) => CatalogVersion.entity(e.entity.name)))
          )
          if (reason !== undefined) {
            yield* SyncMetrics.countResnapshot(reason)
            return Stream.make(resnapshot(reason))
          }
          yield* Metric.increment(SyncMetrics.resumes)
          const live = request.live ?? true
          const narrowing = narrowingOf(view.catalog, scope)
          const waitBeyond = live ? yield* commitSignal(database) : () => Effect.void
          if (live) yield* Effect.acquireRelease(Metric.increment(SyncMetrics.liveStreams), () => Metric.incrementBy(SyncMetrics.liveStreams, -1))
          type State = { readonly position: number; readonly first: boolean }
          return Stream.paginateEffect({ position: cursor!.position, first: true }, (state: State) =>
            Effect.gen(function* (): Effect.fn.Return<readonly [SyncMessage, Option.Option<State>]> {
              if (!state.first) yield* waitBeyond(state.position)
              const step = yield* batch(view, database, scope, narrowing, binding, state.position)
              if (step.message._tag === "Resnapshot") {
                yield* SyncMetrics.countResnapshot(step.message.reason)
                return [step.message, Option.none()] as const
              }
              if (!state.first && step.newest !== undefined) yield* SyncMetrics.recordLag(step.newest)
              return [step.message, live ? Option.some({ position: step.position, first: false }) : Option.none()] as const
            })
          )
        })
      )

    return { snapshot, changes } as const
  })
}) {}

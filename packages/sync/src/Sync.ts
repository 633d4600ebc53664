/**
 * The sync engine every transport calls with a verified principal, its view and its
 * database: snapshot pages of a scope, then the changes after a cursor, filtered
 * through the principal's policy, caught up and then live until the caller stops.
 */
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { CatalogChanged, InvalidQuery, type PublicError, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type ChangesRequest, resnapshot, SyncChange, type SyncCheckpoint, type ResnapshotReason, type SnapshotPage, type SnapshotRequest, type SyncMessage, type SyncRecord } from "@cairn/domain/Sync"
import { type Principal } from "@cairn/domain/Principal"
import { hotSpan } from "@cairn/domain/HotSpan"
import type { Lookup, RecordValue } from "@cairn/policy/Evaluate"
import type { Scalar } from "@cairn/domain/QueryDocument"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { Log } from "@cairn/store"
import { type Database } from "@cairn/store/Databases"
import { Deferred, Effect, Exit, Fiber, FiberId, Metric, Option, Schema, Stream } from "effect"
import { narrowingOf, readsThrough, replay, replayBySubject, type ReplayResult, replaySync, stateAtStart } from "./internal/replay.js"
import { makeWide, type Narrowing, norm, peek, rows, type Wide } from "./internal/rows.js"
import { type ResolvedScope, resolveScope, strip, subjectTemplate } from "./internal/scope.js"
import { readPage } from "./internal/snapshot.js"
import { SyncConfig } from "./SyncConfig.js"
import * as SyncCursor from "./SyncCursor.js"
import * as SyncLiveSink from "./SyncLiveSink.js"
import * as SyncMetrics from "./SyncMetrics.js"

const encodeChange = Schema.encodeSync(SyncChange)
/**
 * The JSON text of each encoded change, made once per change object: streams that see a
 * record alike share its change (see `replay`'s `decide`), so a change list is encoded once
 * however many streams receive it. The list's text is its elements' joined, as
 * `JSON.stringify` of the encoded array would write it.
 */
const changeJson = new WeakMap<SyncChange, string>()
const encodeChanges = (changes: ReadonlyArray<SyncChange>): string => {
  let text = "["
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!
    let json = changeJson.get(change)
    if (json === undefined) changeJson.set(change, (json = JSON.stringify(encodeChange(change))))
    text += i === 0 ? json : `,${json}`
  }
  return `${text}]`
}

/** Thrown by a template kind's lookup whose rows are not read (yet, or at all: too many). */
const unread = new (class Unread {})()

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
    interface Shared {
      readonly answers: Map<string, ReadonlyArray<RecordValue>>
      readonly wide: Wide
      /** Unnarrowed lookups by (entity, field, value), for template kinds (see `decideBySubject`); null: too many rows. */
      readonly every: Map<string, ReadonlyArray<RecordValue> | null>
    }
    const lookupCaches = new Map<string, Map<number, Shared>>()
    const lookupCache = (database: Database, position: number): Shared => {
      let byPosition = lookupCaches.get(database.id)
      if (!byPosition) {
        lookupCaches.set(database.id, (byPosition = new Map()))
        // Bounded: the databases streamed most recently (Map order is insertion order).
        if (lookupCaches.size > 256) lookupCaches.delete(lookupCaches.keys().next().value!)
      }
      let cache = byPosition.get(position)
      if (!cache) {
        byPosition.set(position, (cache = { answers: new Map(), wide: makeWide(), every: new Map() }))
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

    /** One page of a snapshot of `request.scope`, as the principal may see it. */
    // A span without a captured stack: every snapshot page passes here.
    const snapshot = (principal: Principal, view: View, database: Database, request: SnapshotRequest) =>
      hotSpan("Sync.snapshot")(snapshotBody(principal, view, database, request))

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
      /** The position the step read up to if it fit in one batch (the tip, or a `live: false` stream's end). */
      readonly tip: number
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
      /** The JSON text of the encoded changes, made once for every stream sent them directly. */
      encoded?: string
    }
    // By database, then range (`rangeKey`), then kind (`kindKey`): a stream's kind key is one
    // string made once, so finding its group and its range's answer hashes no new text.
    const replayed = new Map<string, Map<string, Map<string, Replayed>>>()
    const rangeKey = (position: number, last: number) => `${position}|${last}`
    const recall = (database: Database, range: string, kind: string): Replayed | undefined => replayed.get(database.id)?.get(range)?.get(kind)
    const remember = (database: Database, range: string, kind: string, value: Replayed) => {
      let byRange = replayed.get(database.id)
      if (!byRange) {
        replayed.set(database.id, (byRange = new Map()))
        if (replayed.size > 256) replayed.delete(replayed.keys().next().value!)
      }
      let byKind = byRange.get(range)
      if (!byKind) {
        byRange.set(range, (byKind = new Map()))
        // Bounded: the newest ranges (Map order is insertion order), and the newest kinds of each.
        if (byRange.size > 16) byRange.delete(byRange.keys().next().value!)
      }
      if (byKind.size >= 4096) byKind.delete(byKind.keys().next().value!)
      byKind.set(kind, value)
    }
    /** What a stream is sent of a range is a function of its catalog, scope and access (and the state): streams of one kind share it. */
    const kindOf = (view: View, scope: ResolvedScope) => `${view.token}|${scope.scopeDigest}|${scope.accessDigest}`
    /** The last position and the compaction watermark, read in one statement (one snapshot). */
    const tipSql = `SELECT (SELECT coalesce(max(position), 0) FROM ${Log.commitsTable}), (SELECT coalesce(max(watermark), 0) FROM ${Log.compactionTable})`

    /** Why the range after `position` up to `last` cannot be replayed, if it cannot. */
    const checked = (position: number, last: number, watermark: number): ResnapshotReason | undefined =>
      position < watermark
        ? "history_compacted"
        : position > last
          ? "cursor_mismatch"
          : last - position > config.maxReplayCommits
            ? "history_compacted"
            : undefined
    const refuse = (reason: ResnapshotReason, position: number): Step => ({ message: resnapshot(reason), position, newest: undefined, tip: position })
    const stepOf = (checkpointAt: (position: number) => SyncCheckpoint, position: number, served: Served, tip = served._tag === "Replayed" ? served.last : position): Step =>
      served._tag === "Refused"
        ? refuse(served.reason, position)
        : served.replayed.result._tag === "AccessChanged"
          ? refuse("access_changed", position)
          : {
              message: {
                _tag: "SyncBatch",
                changes: served.replayed.result.changes,
                checkpoint: checkpointAt(served.last)
              },
              position: served.last,
              newest: served.replayed.newest,
              tip
            }

    /**
     * The commits after `position` (up to `upTo`, else to now), as one batch or a resnapshot,
     * read in one transaction. A stream that `splits` gets at most `maxBatchBytes` of stored
     * changes (at least one commit); its `tip` tells whether it reached the end, else the stream
     * reads the next. One that does not (its policy reads other rows, see `readsThrough`) gets
     * everything up to now: its range is decided against the state read, which must be its end.
     */
    const batch = (
      view: View,
      database: Database,
      scope: ResolvedScope,
      kind: string,
      narrowing: Narrowing,
      checkpointAt: (position: number) => SyncCheckpoint,
      position: number,
      splits: boolean,
      upTo: number | undefined
    ) => {
      const reader = database.reader
      const replayInTransaction = Effect.orDie(
        reader.withTransaction(
          Effect.gen(function* () {
            const last = yield* Log.lastPosition(reader)
            const watermark = yield* Log.watermark(reader)
            const refused = checked(position, last, watermark)
            if (refused !== undefined) return refuse(refused, position)
            const tip = upTo === undefined || !splits ? last : Math.min(upTo, last)
            const end = splits ? yield* Log.batchEnd(reader, position, tip, config.maxBatchBytes) : tip
            // Keyed by the range the batch really covers: streams catching up from one position share it.
            const range = rangeKey(position, end)
            const known = recall(database, range, kind)
            if (known !== undefined) return stepOf(checkpointAt, position, { _tag: "Replayed", last: end, replayed: known }, tip)
            const commits = end === position ? [] : yield* Log.commitsAfter(reader, position, end - position)
            const shared = lookupCache(database, last)
            const result = yield* replay({
              catalog: view.catalog,
              scope,
              reader,
              commits,
              maxDependents: config.maxDependents,
              cache: shared.answers,
              wide: shared.wide,
              narrowing
            })
            const value: Replayed = { result, newest: commits.length > 0 ? commits[commits.length - 1]!.committedAt : undefined }
            remember(database, range, kind, value)
            return stepOf(checkpointAt, position, { _tag: "Replayed", last: end, replayed: value }, tip)
          })
        )
      )
      // One statement first: when another stream of the same kind already replayed this range, its answer is ours
      // (a range up to the tip is only ever remembered whole when it fit in one batch, see `round`).
      return Effect.flatMap(database.values(tipSql, []), (rows) => {
        const last = Number(rows[0]?.[0] ?? 0)
        const watermark = Number(rows[0]?.[1] ?? 0)
        const refused = checked(position, last, watermark)
        if (refused !== undefined) return Effect.succeed(refuse(refused, position))
        const shared = splits && upTo !== undefined && upTo < last ? undefined : recall(database, rangeKey(position, last), kind)
        return shared !== undefined ? Effect.succeed(stepOf(checkpointAt, position, { _tag: "Replayed", last, replayed: shared })) : replayInTransaction
      })
    }

    /**
     * The live tail of a database's streams: one hub per open database, fed by the writer's
     * published position (one subscription for all its streams; the writer only publishes and
     * returns). A stream that has sent everything up to its position waits in the hub; on each
     * commit the hub reads the range once, in one read transaction, and decides it once per
     * template kind of waiter (same position, catalog, scope, and access up to the subject: the
     * members of a project read by one rule), for all its subjects at once (`replayBySubject`
     * over rows read once for all), so a commit costs per distinct rule, not per stream. Where
     * that cannot be (the range changed a row the policy reads through, e.g. a membership), it
     * replays once per kind (same access exactly) against lookups shared by the whole state
     * (see `Wide`). Each waiter gets its subject's shared answer and seals its own checkpoint.
     */
    interface Waiter {
      /** Everything up to here was sent. */
      position: number
      /** The stream stopped waiting (it ended or was interrupted). */
      gone: boolean
      readonly view: View
      readonly scope: ResolvedScope
      /** Names what the stream is sent of a range: its catalog, scope and access (see `kindOf`). */
      readonly kind: string
      readonly subject: string
      /** The scope as a template over the subject (see `subjectTemplate`), if it has one. */
      readonly template: ResolvedScope | undefined
      /** The streams a round decides together: the template's kind, else the stream's. */
      readonly group: string
      readonly narrowing: Narrowing
      /** Whether the stream catches up in bounded batches (see `batch`): then the hub serves it only near the tip. */
      readonly splits: boolean
      /** With a transport's sink, the hub writes each batch itself while the sink takes it. */
      readonly direct: { readonly sink: SyncLiveSink.Sink; readonly checkpointJson: (position: number) => string } | undefined
      /** Completed with the range's answer (for the stream to send), or undefined when the stream must read it itself. */
      readonly done: Deferred.Deferred<Served | undefined>
    }
    type Served =
      | { readonly _tag: "Refused"; readonly reason: ResnapshotReason }
      | { readonly _tag: "Replayed"; readonly last: number; readonly replayed: Replayed }
    interface Hub {
      /** The newest position the writer published. */
      position: number
      readonly waiters: Set<Waiter>
      /** Completed to make the hub look for waiters behind the database's position. */
      wake: Deferred.Deferred<void>
      users: number
      fibers: ReadonlyArray<Fiber.RuntimeFiber<void>>
    }
    const hubs = new Map<string, Hub>()
    const hubLock = yield* Effect.makeSemaphore(1)
    const kick = (hub: Hub) => Deferred.unsafeDone(hub.wake, Exit.void)

    /**
     * The range decided once for every stream of a template kind (`replayBySubject`), over
     * unnarrowed rows shared by the state's readers (each read once, when first needed);
     * undefined when it cannot be (then each kind is replayed on its own).
     */
    const decideBySubject = (database: Database, shared: Shared, view: View, template: ResolvedScope, range: ReadonlyArray<Log.Commit>) =>
      Effect.gen(function* () {
        const every = shared.every
        for (;;) {
          let missing: readonly [string, string, Scalar, string] | undefined
          const lookup: Lookup = (entity, field, value) => {
            const key = `${entity}\u0000${field}\u0000${norm(value)}`
            const found = every.get(key)
            if (found === undefined) {
              missing = [entity, field, value, key]
              throw unread
            }
            if (found === null) throw unread
            return found
          }
          try {
            return replayBySubject(view.catalog, template, range, lookup)
          } catch (e) {
            if (e !== unread) throw e
          }
          // Not missing but refused: more rows than one read may share, so each stream reads its own.
          if (missing === undefined) return undefined
          const [entity, field, value, key] = missing
          every.set(key, (yield* rows(view.catalog, database.reader).every(entity, field, value)) ?? null)
        }
      })

    /** Serves every waiter behind the database's position, in one read transaction. */
    const round = (database: Database, hub: Hub) =>
      Effect.suspend(() => {
        if (hub.waiters.size === 0) return Effect.void
        const reader = database.reader
        const taken: Array<Waiter> = []
        const answers = new Map<Waiter, Served>()
        const serve = Effect.gen(function* () {
          const last = yield* Log.lastPosition(reader)
          const watermark = yield* Log.watermark(reader)
          for (const waiter of hub.waiters) if (waiter.position < last) taken.push(waiter)
          for (const waiter of taken) hub.waiters.delete(waiter)
          if (taken.length === 0) return
          // Group waiters (by position, then template kind or kind); read the commits once, from the oldest position any needs.
          const byPosition = new Map<number, Map<string, Array<Waiter>>>()
          let from = last
          for (const waiter of taken) {
            const refused = checked(waiter.position, last, watermark)
            if (refused !== undefined) {
              answers.set(waiter, { _tag: "Refused", reason: refused })
              continue
            }
            let kinds = byPosition.get(waiter.position)
            if (kinds === undefined) byPosition.set(waiter.position, (kinds = new Map()))
            const group = kinds.get(waiter.group)
            if (group) group.push(waiter)
            else kinds.set(waiter.group, [waiter])
            if (waiter.position < from) from = waiter.position
          }
          if (byPosition.size === 0) return
          // A waiter that splits and whose range would exceed one batch (it fell behind, e.g. paused by
          // its socket) reads its own bounded batches (`batch`) until it is at the tip again. At the tip
          // (one commit behind, or no stream that splits behind) nothing more is read.
          let splitFrom = last - 1
          for (const waiter of taken) if (waiter.splits && waiter.position < splitFrom && !answers.has(waiter)) splitFrom = waiter.position
          if (splitFrom < last - 1) {
            const nearest = Math.min(yield* Log.fittingFrom(reader, splitFrom, last, config.maxBatchBytes), last) - 1
            if (splitFrom < nearest) {
              from = last
              for (const [position, kinds] of byPosition) {
                if (position < nearest) {
                  for (const [group, members] of kinds) {
                    const kept = members.filter((waiter) => !waiter.splits)
                    if (kept.length === 0) kinds.delete(group)
                    else kinds.set(group, kept)
                  }
                  if (kinds.size === 0) {
                    byPosition.delete(position)
                    continue
                  }
                }
                if (position < from) from = position
              }
              if (byPosition.size === 0) return
            }
          }
          const commits = yield* Log.commitsAfter(reader, from, last - from)
          const shared = lookupCache(database, last)
          const recordLag = yield* SyncMetrics.lagRecorder
          let sinceYield = 0
          /** Sends `value` to `waiter` directly when it can, else leaves it the answer to send. */
          const deliver = (waiter: Waiter, value: Replayed) => {
            if (waiter.gone) return
            const result = value.result
            if (waiter.direct !== undefined && result._tag === "Changes") {
              value.encoded ??= encodeChanges(result.changes)
              const checkpoint = waiter.direct.checkpointJson(last)
              if (waiter.direct.sink.offer(`{"_tag":"SyncBatch","changes":${value.encoded},"checkpoint":${checkpoint}}`)) {
                // Sent: the stream stays in the hub, one commit further.
                waiter.position = last
                hub.waiters.add(waiter)
                if (value.newest !== undefined) recordLag(value.newest)
                return
              }
            }
            answers.set(waiter, { _tag: "Replayed", last, replayed: value })
          }
          for (const [position, groups] of byPosition) {
            const range = position === from ? commits : commits.filter((c) => c.position > position)
            const rangeAt = rangeKey(position, last)
            const newest = range.length > 0 ? range[range.length - 1]!.committedAt : undefined
            for (const group of groups.values()) {
              const first = group[0]!
              const bySubject = first.template === undefined ? undefined : yield* decideBySubject(database, shared, first.view, first.template, range)
              if (bySubject !== undefined) {
                // One decision of the range for the whole group; each subject's answer shared by the subjects that decide alike.
                const values = new Map<ReplayResult, Replayed>()
                for (const waiter of group) {
                  // Let other fibers (the writer's acknowledgements, the exchanges writing what was sent) run in between.
                  if (++sinceYield >= 128) {
                    sinceYield = 0
                    yield* Effect.yieldNow()
                  }
                  const result = bySubject(waiter.subject)
                  let value = values.get(result)
                  if (value === undefined) values.set(result, (value = { result, newest }))
                  deliver(waiter, value)
                }
                continue
              }
              const kinds = new Map<string, Array<Waiter>>()
              for (const waiter of group) {
                const same = kinds.get(waiter.kind)
                if (same) same.push(waiter)
                else kinds.set(waiter.kind, [waiter])
              }
              for (const [kind, same] of kinds) {
                if ((sinceYield += same.length) >= 128) {
                  sinceYield = 0
                  yield* Effect.yieldNow()
                }
                const one = same[0]!
                let value = recall(database, rangeAt, kind)
                if (value === undefined) {
                  const options = {
                    catalog: one.view.catalog,
                    scope: one.scope,
                    commits: range,
                    maxDependents: config.maxDependents,
                    cache: shared.answers,
                    wide: shared.wide,
                    narrowing: one.narrowing,
                    peek: peek(shared.answers, one.narrowing, shared.wide)
                  }
                  // Without a statement (nor the effect machinery) when the shared lookups answer it all.
                  const result = replaySync(options) ?? (yield* replay({ ...options, reader }))
                  value = { result, newest }
                  remember(database, rangeAt, kind, value)
                }
                for (const waiter of same) deliver(waiter, value)
              }
            }
          }
        })
        return Effect.exit(reader.withTransaction(serve)).pipe(
          Effect.flatMap((exit) =>
            Effect.sync(() => {
              // Whatever was not answered (a failed read) reads the range itself.
              for (const waiter of taken) {
                const answer = Exit.isSuccess(exit) ? answers.get(waiter) : undefined
                // A stream sent its batch directly stays waiting, unless the read failed.
                if (answer !== undefined || !hub.waiters.has(waiter)) Deferred.unsafeDone(waiter.done, Exit.succeed(answer))
              }
            })
          )
        )
      })

    const acquireHub = (database: Database) =>
      hubLock.withPermits(1)(
        Effect.gen(function* () {
          const existing = hubs.get(database.id)
          if (existing) {
            existing.users += 1
            return existing
          }
          const hub: Hub = {
            position: yield* database.committed.get,
            waiters: new Set(),
            wake: Deferred.unsafeMake(FiberId.none),
            users: 1,
            fibers: []
          }
          const watcher = yield* database.committed.changes.pipe(
            Stream.runForEach((position) =>
              Effect.sync(() => {
                hub.position = position
                kick(hub)
              })
            ),
            // Acquisition is uninterruptible and a fork inherits that; the fibers must stay stoppable.
            Effect.interruptible,
            Effect.forkDaemon
          )
          const worker = yield* Effect.suspend(() => {
            const fired = hub.wake
            return Effect.zipRight(
              Deferred.await(fired),
              Effect.suspend(() => {
                hub.wake = Deferred.unsafeMake(FiberId.none)
                // A round that dies must not stop the hub (its streams would wait forever).
                return Effect.catchAllCause(round(database, hub), (cause) => Effect.logError("sync hub round failed", cause))
              })
            )
          }).pipe(Effect.forever, Effect.interruptible, Effect.forkDaemon)
          hub.fibers = [watcher, worker]
          hubs.set(database.id, hub)
          return hub
        })
      )
    const releaseHub = (database: Database, hub: Hub) =>
      hubLock.withPermits(1)(
        Effect.suspend(() => {
          hub.users -= 1
          if (hub.users > 0) return Effect.void
          hubs.delete(database.id)
          lookupCaches.delete(database.id)
          replayed.delete(database.id)
          return Fiber.interruptAll(hub.fibers)
        })
      )
    /** The answer for the range after `position`, once the database commits past it. */
    /**
     * The answer for the range after `position`, once the database commits past it, with the
     * position the stream is at by then (past `position` when the hub sent batches directly).
     */
    const awaitServed = (
      hub: Hub,
      spec: Omit<Waiter, "position" | "gone" | "done">,
      position: number
    ): Effect.Effect<readonly [Served | undefined, number]> =>
      Effect.suspend(() => {
        const waiter: Waiter = { ...spec, position, gone: false, done: Deferred.unsafeMake(FiberId.none) }
        hub.waiters.add(waiter)
        if (hub.position > position) kick(hub)
        return Effect.ensuring(
          Effect.map(Deferred.await(waiter.done), (served) => [served, waiter.position] as const),
          Effect.sync(() => {
            waiter.gone = true
            hub.waiters.delete(waiter)
          })
        )
      })

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
          const hub = live ? yield* Effect.acquireRelease(acquireHub(database), (hub) => releaseHub(database, hub)) : undefined
          const sink = Option.getOrUndefined(yield* Effect.serviceOption(SyncLiveSink.SyncLiveSink))
          // The stream's cursors: its binding sealed once, each position MACed (see `SyncCursor.checkpointer`).
          const checkpoints = SyncCursor.streamCheckpoints(sealer, binding)
          const checkpointAt = checkpoints.at
          const kind = kindOf(view, scope)
          const template = subjectTemplate(scope, principal.subject)
          const group = template === undefined ? `kind|${kind}` : `template|${kindOf(view, template)}`
          const splits = !readsThrough(scope)
          const spec = { view, scope, kind, subject: principal.subject, template, group, narrowing, splits, direct: sink === undefined ? undefined : { sink, checkpointJson: checkpoints.json } }
          if (live) yield* Effect.acquireRelease(Metric.increment(SyncMetrics.liveStreams), () => Metric.incrementBy(SyncMetrics.liveStreams, -1))
          /**
           * `behind`: the stream has not reached the tip, so it reads its next batch itself (without
           * waiting for a commit); at the tip a live stream waits in the hub. `upTo`: where a
           * `live: false` stream ends, the tip when it started.
           */
          type State = { readonly position: number; readonly first: boolean; readonly behind: boolean; readonly upTo: number | undefined }
          return Stream.paginateEffect({ position: cursor!.position, first: true, behind: true, upTo: undefined }, (state: State) =>
            Effect.gen(function* (): Effect.fn.Return<readonly [SyncMessage, Option.Option<State>]> {
              const [served, position] = state.behind || hub === undefined ? [undefined, state.position] : yield* awaitServed(hub, spec, state.position)
              const step =
                served !== undefined
                  ? stepOf(checkpointAt, position, served)
                  : yield* batch(view, database, scope, kind, narrowing, checkpointAt, position, splits, live ? undefined : state.upTo)
              if (step.message._tag === "Resnapshot") {
                yield* SyncMetrics.countResnapshot(step.message.reason)
                return [step.message, Option.none()] as const
              }
              if (!state.first && step.newest !== undefined) yield* SyncMetrics.recordLag(step.newest)
              const upTo = state.upTo ?? step.tip
              const behind = step.position < (live ? step.tip : upTo)
              return [step.message, live || behind ? Option.some({ position: step.position, first: false, behind, upTo }) : Option.none()] as const
            })
          )
        })
      )

    return { snapshot, changes } as const
  })
}) {}

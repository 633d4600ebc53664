/**
 * The live tail of one open database's changes streams, and the caches its streams share.
 * `Sync` holds one per open database in an `RcMap` entry that every stream of the database
 * holds while it runs: the hub, its fibers and its caches live exactly as long as some stream does.
 *
 * A commit's journey, and why the concurrency is safe:
 *
 * 1. The writer commits and publishes its position (`database.committed`). Publishing only sets
 *    a `SubscriptionRef`: the writer never waits for a stream, however many are live.
 * 2. The hub's watcher (one subscription per open database, not per stream) records the position
 *    and completes `wake`. Completing it again is a no-op, so the commits made during a round
 *    coalesce into one more round, never into a queue of rounds.
 * 3. The worker, woken, puts a fresh `wake` in place before the round, so a commit during the
 *    round wakes the next one. The round runs in one read transaction and reads its end (`last`)
 *    inside it: every stream is decided against one state, whatever the writer commits meanwhile.
 *    A round that dies is logged and the worker goes on: its streams read their ranges themselves.
 * 4. The round takes the waiters behind `last` out of the set in one synchronous step. A stream
 *    that starts waiting later joins the next round (and kicks it if the hub is already past it:
 *    see `awaitServed`), so none is missed and none is served twice.
 * 5. It groups the waiters by position and template kind, reads the commits once (from the oldest
 *    position any needs) and decides each group once: `replayBySubject` for all the subjects of a
 *    template at once, else one replay per kind against lookups shared by the state (`Shared`).
 *    It yields every 128 streams, so the writer's acknowledgements and the transports run between.
 * 6. Each stream gets its kind's answer. With a transport sink, the round writes the batch itself
 *    (the domain's `syncBatchJson`, the changes encoded once per range) and the stream stays in the
 *    hub one commit further; when the sink refuses (its buffer is full) or the answer is a
 *    resnapshot, the stream's `done` completes and the stream sends the answer at its transport's
 *    pace. A stream that ended is marked `gone` first, so a round never writes to it again.
 * 7. A stream that fell behind (paused by its socket, or resumed from an old cursor) whose range
 *    exceeds one batch is not served by the round: it is sent away with no answer and catches up
 *    in its own bounded batches (`batch`: at most `maxBatchBytes` of stored changes and
 *    `maxBatchCommits` commits each, each read in its own transaction, shared by the streams catching
 *    up from one position), then waits in the hub again; one whose range must be decided whole (its
 *    policy reads other rows) is sent a resnapshot instead. A slow stream never makes a round read or
 *    hold more than one batch's worth.
 * 8. When the database's last stream ends, the `RcMap` entry's scope closes: the watcher and the
 *    worker are interrupted, and the caches, fields of this hub, go with it.
 */
import { type View } from "@cairn/catalog/View"
import { syncBatchJson, syncChangesJson, resnapshot, type ResnapshotReason, type SyncCheckpoint, type SyncMessage } from "@cairn/domain/Sync"
import type { Scalar } from "@cairn/domain/QueryDocument"
import type { Lookup } from "@cairn/policy/Evaluate"
import { Log } from "@cairn/store"
import { type ReadableDatabase } from "@cairn/store/Database"
import { Deferred, Effect, Exit, FiberId, type Scope, Stream } from "effect"
import { makeLookups, makeRanges, rangeKey, type Replayed, type Shared } from "./internal/caches.js"
import { narrowingOf, readsThrough, replay, replayBySubject, type ReplayResult, replaySync } from "./internal/replay.js"
import { type Narrowing, norm, peek, rows } from "./internal/rows.js"
import { type ResolvedScope, subjectTemplate } from "./internal/scope.js"
import { type SyncConfigShape } from "./SyncConfig.js"
import * as SyncLiveSink from "@cairn/domain/SyncLiveSink"
import * as SyncMetrics from "./SyncMetrics.js"

/** One step of a changes stream: its next message and where it leaves the stream. */
export interface Step {
  readonly message: SyncMessage
  readonly position: number
  /** Commit time of the newest commit replayed, for the lag metric. */
  readonly newest: string | undefined
  /** The position the step read up to if it fit in one batch (the tip, or a `live: false` stream's end). */
  readonly tip: number
}

/** A changes stream as the hub serves it: what decides what it is sent, and how its checkpoints are made. */
export interface Subscriber {
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
  readonly checkpointAt: (position: number) => SyncCheckpoint
  /** The token the stream was opened with has expired: nothing more is written to it directly. */
  readonly expired: () => boolean
}

/** What a stream is sent of a range is a function of its catalog, scope and access (and the state): streams of one kind share it. */
const kindOf = (view: View, scope: ResolvedScope) => `${view.token}|${scope.scopeDigest}|${scope.accessDigest}`

/** The stream of `subject` over `scope`, its checkpoints made by `checkpoints` (see `SyncCursor.streamCheckpoints`). */
export const subscriber = (options: {
  readonly view: View
  readonly scope: ResolvedScope
  readonly subject: string
  readonly checkpoints: { readonly at: (position: number) => SyncCheckpoint; readonly json: (position: number) => string }
  readonly sink: SyncLiveSink.Sink | undefined
  readonly expired?: () => boolean
}): Subscriber => {
  const { checkpoints, scope, sink, subject, view } = options
  const kind = kindOf(view, scope)
  const template = subjectTemplate(scope, subject)
  return {
    view,
    scope,
    kind,
    subject,
    template,
    group: template === undefined ? `kind|${kind}` : `template|${kindOf(view, template)}`,
    narrowing: narrowingOf(view.catalog, scope),
    splits: !readsThrough(scope),
    direct: sink === undefined ? undefined : { sink, checkpointJson: checkpoints.json },
    checkpointAt: checkpoints.at,
    expired: options.expired ?? (() => false)
  }
}

export interface Hub {
  /**
   * The stream's step after `position`. With `wait`, once the database commits past it, the
   * hub's answer (the hub may have sent batches directly meanwhile: the step starts where they
   * left the stream); else, or when the hub leaves the range to the stream, its next batch read
   * now (`upTo`: where a `live: false` stream ends).
   */
  readonly next: (subscriber: Subscriber, position: number, wait: boolean, upTo: number | undefined) => Effect.Effect<Step>
}

/**
 * A stream that has sent everything up to its position waits in the hub; on each commit a
 * round serves it (see the timeline above).
 */
interface Waiter extends Subscriber {
  /** Everything up to here was sent. */
  position: number
  /** The stream stopped waiting (it ended or was interrupted). */
  gone: boolean
  /** Completed with the range's answer (for the stream to send), or undefined when the stream must read it itself. */
  readonly done: Deferred.Deferred<Served | undefined>
}
type Served =
  | { readonly _tag: "Refused"; readonly reason: ResnapshotReason }
  | { readonly _tag: "Replayed"; readonly last: number; readonly replayed: Replayed }

/** Thrown by a template kind's lookup whose rows are not read (yet, or at all: too many). */
const unread = new (class Unread {})()

/** The last position and the compaction watermark, read in one statement (one snapshot). */
const tipSql = `SELECT (SELECT coalesce(max(position), 0) FROM ${Log.commitsTable}), (SELECT coalesce(max(watermark), 0) FROM ${Log.compactionTable})`

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
 * The hub of `database`: its watcher and worker run in the scope (the `RcMap` entry's), and
 * are interrupted when it closes.
 */
export const make = (database: ReadableDatabase, config: SyncConfigShape): Effect.Effect<Hub, never, Scope.Scope> =>
  Effect.gen(function* () {
    /** The newest position the writer published. */
    let position = yield* database.committed.get
    const waiters = new Set<Waiter>()
    /** Completed to make the hub look for waiters behind the database's position. */
    let wake = Deferred.unsafeMake<void>(FiberId.none)
    const kick = () => Deferred.unsafeDone(wake, Exit.void)
    const lookupCache = makeLookups()
    const { recall, remember } = makeRanges()

    /** Why the range after `position` up to `last` cannot be replayed, if it cannot. */
    const checked = (position: number, last: number, watermark: number): ResnapshotReason | undefined =>
      position < watermark
        ? "history_compacted"
        : position > last
          ? "cursor_mismatch"
          : last - position > config.maxReplayCommits
            ? "history_compacted"
            : undefined

    /**
     * The commits after `position` (up to `upTo`, else to now), as one batch or a resnapshot,
     * read in one transaction. A stream that `splits` gets at most `maxBatchBytes` of stored
     * changes (at least one commit); its `tip` tells whether it reached the end, else the stream
     * reads the next. One that does not (its policy reads other rows, see `readsThrough`) gets
     * everything up to now: its range is decided against the state read, which must be its end.
     */
    const batch = (subscriber: Subscriber, position: number, upTo: number | undefined) => {
      const { checkpointAt, kind, narrowing, scope, splits, view } = subscriber
      const reader = database.reader
      const replayInTransaction = Effect.orDie(
        reader.withTransaction(
          Effect.gen(function* () {
            const last = yield* Log.lastPosition(reader)
            const watermark = yield* Log.watermark(reader)
            const refused = checked(position, last, watermark)
            if (refused !== undefined) return refuse(refused, position)
            const tip = upTo === undefined || !splits ? last : Math.min(upTo, last)
            // A batch replays at most `maxBatchCommits` commits and `maxBatchBytes` of their changes (one larger commit alone).
            const end = Math.min(yield* Log.batchEnd(reader, position, tip, config.maxBatchBytes), position + config.maxBatchCommits)
            // A range that must be decided whole (see `readsThrough`) and exceeds one batch is not replayed: resnapshot.
            if (!splits && end < tip) return refuse("too_far_behind", position)
            // Keyed by the range the batch really covers: streams catching up from one position share it.
            const range = rangeKey(position, end)
            const known = recall(range, kind)
            if (known !== undefined) return stepOf(checkpointAt, position, { _tag: "Replayed", last: end, replayed: known }, tip)
            const commits = end === position ? [] : yield* Log.commitsAfter(reader, position, end - position)
            const shared = lookupCache(last)
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
            remember(range, kind, value)
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
        const shared = splits && upTo !== undefined && upTo < last ? undefined : recall(rangeKey(position, last), kind)
        return shared !== undefined ? Effect.succeed(stepOf(checkpointAt, position, { _tag: "Replayed", last, replayed: shared })) : replayInTransaction
      })
    }

    /**
     * The range decided once for every stream of a template kind (`replayBySubject`), over
     * unnarrowed rows shared by the state's readers (each read once, when first needed);
     * undefined when it cannot be (then each kind is replayed on its own).
     */
    const decideBySubject = (shared: Shared, view: View, template: ResolvedScope, range: ReadonlyArray<Log.Commit>) =>
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
    const round = Effect.suspend(() => {
      if (waiters.size === 0) return Effect.void
      const reader = database.reader
      const taken: Array<Waiter> = []
      const answers = new Map<Waiter, Served>()
      const serve = Effect.gen(function* () {
        const last = yield* Log.lastPosition(reader)
        const watermark = yield* Log.watermark(reader)
        for (const waiter of waiters) if (waiter.position < last) taken.push(waiter)
        for (const waiter of taken) waiters.delete(waiter)
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
        // A waiter whose range would exceed one batch (it fell behind, e.g. paused by its socket, or its
        // cursor is old) is not served by the round: it reads its own bounded batches (`batch`) until it
        // is at the tip again, or, when its range must be decided whole, is sent a resnapshot there. At
        // the tip (one commit behind) nothing more is read, so a round replays at most one batch's worth.
        let lowest = last - 1
        for (const waiter of taken) if (waiter.position < lowest && !answers.has(waiter)) lowest = waiter.position
        if (lowest < last - 1) {
          const fitting = Math.min(yield* Log.fittingFrom(reader, lowest, last, config.maxBatchBytes), last) - 1
          const nearest = Math.max(fitting, last - config.maxBatchCommits)
          if (lowest < nearest) {
            from = last
            for (const position of [...byPosition.keys()]) {
              if (position < nearest) byPosition.delete(position)
              else if (position < from) from = position
            }
            if (byPosition.size === 0) return
          }
        }
        const commits = yield* Log.commitsAfter(reader, from, last - from)
        const shared = lookupCache(last)
        const recordLag = yield* SyncMetrics.lagRecorder
        let sinceYield = 0
        /** Sends `value` to `waiter` directly when it can, else leaves it the answer to send. */
        const deliver = (waiter: Waiter, value: Replayed) => {
          if (waiter.gone) return
          const result = value.result
          if (waiter.direct !== undefined && result._tag === "Changes" && !waiter.expired()) {
            value.encoded ??= syncChangesJson(result.changes)
            if (waiter.direct.sink.offer(syncBatchJson(value.encoded, waiter.direct.checkpointJson(last)))) {
              // Sent: the stream stays in the hub, one commit further.
              waiter.position = last
              waiters.add(waiter)
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
            const bySubject = first.template === undefined ? undefined : yield* decideBySubject(shared, first.view, first.template, range)
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
              let value = recall(rangeAt, kind)
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
                remember(rangeAt, kind, value)
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
              if (answer !== undefined || !waiters.has(waiter)) Deferred.unsafeDone(waiter.done, Exit.succeed(answer))
            }
          })
        )
      )
    })

    // The fibers run in the hub's scope; acquisition may be uninterruptible and a fork inherits
    // that, so they are made interruptible: closing the scope must stop them.
    yield* database.committed.changes.pipe(
      Stream.runForEach((published) =>
        Effect.sync(() => {
          position = published
          kick()
        })
      ),
      Effect.interruptible,
      Effect.forkScoped
    )
    yield* Effect.suspend(() => {
      const fired = wake
      return Effect.zipRight(
        Deferred.await(fired),
        Effect.suspend(() => {
          wake = Deferred.unsafeMake(FiberId.none)
          // A round that dies must not stop the hub (its streams would wait forever).
          return Effect.catchAllCause(round, (cause) => Effect.logError("sync hub round failed", cause))
        })
      )
    }).pipe(Effect.forever, Effect.interruptible, Effect.forkScoped)

    /**
     * The answer for the range after `from`, once the database commits past it, with the
     * position the stream is at by then (past `from` when the hub sent batches directly).
     */
    const awaitServed = (subscriber: Subscriber, from: number): Effect.Effect<readonly [Served | undefined, number]> =>
      Effect.suspend(() => {
        const waiter: Waiter = { ...subscriber, position: from, gone: false, done: Deferred.unsafeMake(FiberId.none) }
        waiters.add(waiter)
        if (position > from) kick()
        return Effect.ensuring(
          Effect.map(Deferred.await(waiter.done), (served) => [served, waiter.position] as const),
          Effect.sync(() => {
            waiter.gone = true
            waiters.delete(waiter)
          })
        )
      })

    const hub: Hub = {
      next: (subscriber, from, wait, upTo) =>
        wait
          ? Effect.flatMap(awaitServed(subscriber, from), ([served, at]) =>
              served !== undefined ? Effect.succeed(stepOf(subscriber.checkpointAt, at, served)) : batch(subscriber, at, upTo)
            )
          : batch(subscriber, from, upTo)
    }
    return hub
  })

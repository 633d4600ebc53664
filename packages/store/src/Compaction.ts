/**
 * Compaction: drops the change payloads of commits older than the retained history, then prunes
 * receipts and commit headers past their retention, as a job of each open database on its own
 * schedule (`compactEvery` after it opened, then after each run), whatever traffic the database sees.
 * Positions stay; sync's replayable history shrinks (an older cursor gets a resnapshot) and an
 * invocation id older than the retained receipts is refused from then on (see `Log.prune`).
 */
import { Cause, Clock, Duration, Effect, FiberRef, HashMap, Metric } from "effect"
import type * as Writer from "./Writer.js"

export const compactedCommits = Metric.counter("cairn_sync_compacted_commits_total", {
  description: "Commits whose change payloads compaction dropped",
  incremental: true
})

export const prunedHistory = Metric.counter("cairn_history_pruned_total", {
  description: "Receipts and commit headers pruned past their retention, by kind: receipt, commit",
  incremental: true
})

/** How long receipts and commit headers are kept (see `StoreConfig`). */
export interface Retention {
  readonly receipts: Duration.Duration
  readonly commits: Duration.Duration
}

/**
 * Prunes receipts minted, and payload-less commit headers committed, more than their retention ago,
 * a chunk per transaction (the writer's groups take turns in between) until none is left.
 */
export const prune = (writer: Pick<Writer.Writer, "prune">, retention: Retention): Effect.Effect<void> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const receiptsBefore = now - Duration.toMillis(retention.receipts)
    const commitsBefore = new Date(Math.max(0, now - Duration.toMillis(retention.commits))).toISOString()
    for (;;) {
      const pruned = yield* writer.prune(receiptsBefore, commitsBefore)
      yield* Metric.incrementBy(Metric.tagged(prunedHistory, "kind", "receipt"), pruned.receipts)
      yield* Metric.incrementBy(Metric.tagged(prunedHistory, "kind", "commit"), pruned.commits)
      if (pruned.receipts === 0 && pruned.commits === 0) return
      yield* Effect.yieldNow()
    }
  })

/**
 * Keeps the change payloads of the last `retainedCommits` commits of `writer`'s log and
 * drops the older ones, then (given a `retention`) prunes history past it; answers how many
 * commits lost their payload.
 */
export const compact = (
  writer: Pick<Writer.Writer, "position" | "compact" | "prune">,
  retainedCommits: number,
  retention?: Retention
): Effect.Effect<number> =>
  Effect.gen(function* () {
    const through = (yield* writer.position) - retainedCommits
    const dropped = through <= 0 ? 0 : yield* writer.compact(through)
    yield* Metric.incrementBy(compactedCommits, dropped)
    if (retention !== undefined) yield* prune(writer, retention)
    return dropped
  }).pipe(Effect.withSpan("Compaction.compact", { root: true }))

/**
 * One scheduled run of `run` (the store arms it every `compactEvery` per open database, see
 * `OpenDatabase`), logging under the database's opaque id: a failed run is logged and the next one
 * comes on schedule.
 */
export const scheduled = (run: Effect.Effect<number>, databaseId: string): Effect.Effect<void> =>
  run.pipe(
    Effect.catchAllCause((cause) => (Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError("compaction failed", cause))),
    Effect.asVoid,
    Effect.annotateLogs({ database: databaseId }),
    // Run for the database, not for the request that opened it: none of that request's annotations.
    Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty())
  )

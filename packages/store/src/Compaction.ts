/**
 * Compaction: drops the change payloads of commits older than the retained history,
 * as a job of each open database on its own schedule (`compactEvery` after it opened, then after
 * each run), whatever traffic the database sees. Positions, receipts and intents stay; only
 * sync's replayable history shrinks.
 */
import { Cause, Effect, FiberRef, HashMap, Metric } from "effect"
import type * as Writer from "./Writer.js"

export const compactedCommits = Metric.counter("cairn_sync_compacted_commits_total", {
  description: "Commits whose change payloads compaction dropped",
  incremental: true
})

/**
 * Keeps the change payloads of the last `retainedCommits` commits of `writer`'s log and
 * drops the older ones; answers how many commits lost theirs.
 */
export const compact = (writer: Pick<Writer.Writer, "position" | "compact">, retainedCommits: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const through = (yield* writer.position) - retainedCommits
    if (through <= 0) return 0
    const dropped = yield* writer.compact(through)
    yield* Metric.incrementBy(compactedCommits, dropped)
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

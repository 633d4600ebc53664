/**
 * Compaction: drops the change payloads of commits older than the retained history,
 * as a job of each open database on its own schedule, whatever traffic the database
 * sees. Positions, receipts and intents stay; only sync's replayable history shrinks.
 */
import { Cause, type Duration, Effect, FiberRef, HashMap, Metric } from "effect"
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
 * Runs `run` every `every` until the scope closes (the database's: the job stops with it),
 * logging under the database's opaque id.
 * A failed run is logged and the next one comes on schedule.
 */
export const schedule = (run: Effect.Effect<number>, every: Duration.Duration, databaseId: string) =>
  Effect.sleep(every).pipe(
    Effect.zipRight(run),
    Effect.catchAllCause((cause) => (Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError("compaction failed", cause))),
    Effect.forever,
    Effect.annotateLogs({ database: databaseId }),
    // Forked from the activation that opened the database: it keeps none of that request's annotations.
    Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty()),
    Effect.forkScoped,
    Effect.asVoid
  )

/**
 * Sync observability: resumes, resnapshots by public reason, snapshot sizes and the
 * lag from commit to delivery. Tagged only with public values, never ids or keys.
 */
import { ResnapshotReason } from "@cairn/domain/Sync"
import { Effect, FiberRef, Metric, MetricBoundaries } from "effect"

export const resumes = Metric.counter("cairn_sync_resumes_total", { description: "Changes streams resumed from a valid cursor", incremental: true })

export const resnapshots = Metric.counter("cairn_sync_resnapshots_total", {
  description: "Resnapshot instructions sent, by public reason",
  incremental: true
})

export const snapshotRecords = Metric.histogram(
  "cairn_sync_snapshot_records",
  MetricBoundaries.exponential({ start: 1, factor: 4, count: 12 }),
  "Records in each completed snapshot"
)

export const snapshotPages = Metric.counter("cairn_sync_snapshot_pages_total", { description: "Snapshot pages served", incremental: true })

export const snapshotPageBytes = Metric.histogram(
  "cairn_sync_snapshot_page_bytes",
  MetricBoundaries.exponential({ start: 256, factor: 4, count: 10 }),
  "Encoded record bytes in each snapshot page served"
)

/** Changes streams open right now (a gauge moved up when one opens and down when it ends). */
export const liveStreams = Metric.gauge("cairn_sync_live_streams", { description: "Live sync changes streams currently open" })

export const lagMillis = Metric.histogram(
  "cairn_sync_lag_ms",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 16 }),
  "Milliseconds from a commit to the delivery of the batch carrying it"
)

export const countResnapshot = (reason: ResnapshotReason) => Metric.increment(Metric.tagged(resnapshots, "reason", reason))

export const recordLag = (committedAt: string) =>
  Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
    Metric.update(lagMillis, Math.max(0, now - Date.parse(committedAt)))
  )

/**
 * `recordLag` for many deliveries (the hub's direct batches): the clock and the fiber's
 * metric labels taken once, then each delivery recorded synchronously when it happens.
 */
export const lagRecorder: Effect.Effect<(committedAt: string) => void> = Effect.clockWith((clock) =>
  Effect.map(FiberRef.get(FiberRef.currentMetricLabels), (labels) => {
    // The last commit time parsed: a round delivers the same commit to every stream.
    let parsed: { readonly text: string; readonly millis: number } | undefined
    return (committedAt: string) => {
      if (parsed?.text !== committedAt) parsed = { text: committedAt, millis: Date.parse(committedAt) }
      lagMillis.unsafeUpdate(Math.max(0, clock.unsafeCurrentTimeMillis() - parsed.millis), labels)
    }
  })
)

/**
 * Every sync family at zero before any traffic, resnapshots by each public reason: a series
 * born at its first event gives `rate()` nothing to rise from (a resnapshot storm's first
 * minutes would not show).
 */
export const atZero: Effect.Effect<void> = Effect.all(
  [
    Metric.value(resumes),
    ...ResnapshotReason.literals.map((reason) => Metric.value(Metric.tagged(resnapshots, "reason", reason))),
    Metric.value(snapshotRecords),
    Metric.value(snapshotPages),
    Metric.value(snapshotPageBytes),
    Metric.value(liveStreams),
    Metric.value(lagMillis)
  ],
  { discard: true }
)

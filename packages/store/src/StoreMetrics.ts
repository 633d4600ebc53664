/**
 * The store's metric families at zero, with every label value they can take: Prometheus
 * alerts on `rate()` or `increase()` of a series, and a series that appears only at its first
 * event has no earlier sample to rise from (that first event is never seen).
 */
import { Effect, Metric } from "effect"
import { compactedCommits } from "./Compaction.js"
import { activationLatency, activations, evictions, openDatabases, openReaders } from "./Databases.js"
import { storageFaults } from "./StorageFault.js"
import { groupSize, mutationsTotal, queueDepth } from "./Writer.js"

/** Receipt outcomes the writer counts (`countOutcome`). */
export const mutationOutcomes = ["committed", "rejected", "replayed", "conflict", "inaccessible", "overloaded", "unavailable", "defect"] as const

/** Storage fault kinds: found on open or by a check, then raised by SQLite or the OS on a write. */
export const faultKinds = ["missing", "empty", "corrupt", "foreign", "rolled_back", "full_disk", "io_error"] as const

/** Why a database was closed. */
export const closeReasons = ["idle", "capacity", "shutdown"] as const

// Reading a metric's value creates its state in the registry (at zero), without counting anything.
const zero = <In, Out>(metric: Metric.Metric<any, In, Out>) => Effect.asVoid(Metric.value(metric))

/** Every store family present at zero. */
export const atZero: Effect.Effect<void> = Effect.all(
  [
    ...mutationOutcomes.map((outcome) => zero(Metric.tagged(mutationsTotal, "outcome", outcome))),
    ...faultKinds.map((kind) => zero(Metric.tagged(storageFaults, "kind", kind))),
    ...closeReasons.map((reason) => zero(Metric.tagged(evictions, "reason", reason))),
    zero(queueDepth),
    zero(groupSize),
    zero(activations),
    zero(activationLatency),
    zero(openDatabases),
    zero(openReaders),
    zero(compactedCommits)
  ],
  { discard: true }
)

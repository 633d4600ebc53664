/**
 * The engine's own metrics, counted once in `DataPlane` whatever the transport: verb latency
 * and outcome by transport and verb, and query-budget failures by limit. The transport is an
 * ambient label each route sets (`CurrentTransport`); labels are closed sets, never ids or text.
 */
import { Context, Effect, Exit, Metric, MetricBoundaries, MetricKey, Stream } from "effect"
import { labelled } from "../operations/FrontMetrics.js"

/** `cluster`: a call another process forwarded to the one running the database (counted there as well as where it came in). */
export type TransportName = "rpc" | "sync" | "mcp" | "files" | "cluster" | "internal"

/** Which way in the current call came; the routes set it, anything else is `internal`. */
export class CurrentTransport extends Context.Reference<CurrentTransport>()("@cairn/server/EngineMetrics/CurrentTransport", {
  defaultValue: (): TransportName => "internal"
}) {}

const verbLatencyKey = MetricKey.histogram(
  "cairn_engine_verb_duration_ms",
  MetricBoundaries.exponential({ start: 0.25, factor: 2, count: 16 }),
  "Milliseconds the engine spent on one verb (admission to answer), by transport, verb and outcome"
)
export const verbLatency = Metric.fromMetricKey(verbLatencyKey)

export const budgetFailures = Metric.counter("cairn_query_budget_failures_total", {
  description: "Requests refused with query_budget_exceeded, by transport and the limit that was exceeded",
  incremental: true
})

/** The limits a budget failure may name; anything else is counted as `other` so the label set stays closed. */
const knownLimits = new Set([
  "maxPageSize",
  "maxProjection",
  "maxPathDepth",
  "maxFilterNodes",
  "maxInValues",
  "maxOrderTerms",
  "maxRowsExamined",
  "discoveryMaxLimit",
  "snapshot size"
])

const limitLabel = (limit: unknown) => (typeof limit === "string" && knownLimits.has(limit) ? limit.replace(/ /g, "_") : "other")

interface Tagged {
  readonly _tag: string
  readonly code?: string
  readonly limit?: unknown
}

/** The public code of an engine failure, or its refusal kind: a closed set. */
const outcomeOf = (error: Tagged): string =>
  typeof error.code === "string" ? error.code : error._tag === "InternalFailure" ? "internal_error" : error._tag.replace(/[A-Z]/g, (c, i) => `${i === 0 ? "" : "_"}${c.toLowerCase()}`)

// Tagged metrics are built once per label set (the sets are closed), not on every request.
const latencyFor = new Map<string, Metric.Metric.Histogram<number>>()
const latencyOf = (transport: string, verb: string, outcome: string) => {
  const key = `${transport}\u0000${verb}\u0000${outcome}`
  let metric = latencyFor.get(key)
  if (metric === undefined) {
    metric = labelled(verbLatencyKey, [
      ["transport", transport],
      ["verb", verb],
      ["outcome", outcome]
    ])
    latencyFor.set(key, metric)
  }
  return metric
}

const countBudget = (transport: TransportName, error: Tagged) =>
  error._tag === "QueryBudgetExceeded"
    ? Metric.increment(Metric.tagged(Metric.tagged(budgetFailures, "transport", transport), "limit", limitLabel(error.limit)))
    : Effect.void

/** Times one verb and counts its outcome (and any budget failure) under the current transport. */
export const instrument =
  (verb: string) =>
  <A, E extends Tagged, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(CurrentTransport, (transport) => {
      const started = performance.now()
      return Effect.onExit(effect, (exit) => {
        const millis = performance.now() - started
        let outcome = "ok"
        let budget: Effect.Effect<void> = Effect.void
        if (Exit.isFailure(exit)) {
          const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
          outcome = failure === undefined ? (exit.cause._tag === "Interrupt" ? "interrupted" : "internal_error") : outcomeOf(failure)
          if (failure !== undefined) budget = countBudget(transport, failure)
        }
        return Effect.zipRight(
          budget,
          Metric.update(latencyOf(transport, verb, outcome), millis)
        )
      })
    })

/** For a stream verb (`changes`): its failures and budget refusals, counted like any verb's. */
export const instrumentStream =
  (verb: string) =>
  <A, E extends Tagged, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
    Stream.unwrap(
      Effect.map(CurrentTransport, (transport) =>
        Stream.tapError(stream, (error) =>
          Effect.zipRight(
            countBudget(transport, error),
            Metric.update(latencyOf(transport, verb, outcomeOf(error)), 0)
          )
        )
      )
    )

/** The verbs each way in serves (closed sets: the labels `instrument` gives them). */
export const verbsByTransport: ReadonlyArray<readonly [TransportName, ReadonlyArray<string>]> = [
  ["rpc", ["describe", "query", "mutate"]],
  ["mcp", ["describe", "query", "mutate"]],
  ["sync", ["snapshot", "changes"]],
  ["files", ["upload", "download", "link", "resumable"]]
]

/**
 * The engine's families at zero before any traffic (a series born at its first event gives
 * `rate()` nothing to rise from): each verb's latency for the outcomes alerts watch (`ok` and
 * `internal_error`; other outcomes appear as they happen), and budget failures by every limit.
 */
export const atZero: Effect.Effect<void> = Effect.all(
  [
    ...verbsByTransport.flatMap(([transport, verbs]) =>
      verbs.flatMap((verb) => ["ok", "internal_error"].map((outcome) => Metric.value(latencyOf(transport, verb, outcome))))
    ),
    ...(["rpc", "mcp", "sync"] as const).flatMap((transport) =>
      [...knownLimits].map((limit) => Metric.value(Metric.tagged(Metric.tagged(budgetFailures, "transport", transport), "limit", limitLabel(limit))))
    )
  ],
  { discard: true }
)

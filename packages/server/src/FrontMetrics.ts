/**
 * The front's request metrics (Effect metrics, so any exporter can ship them): requests
 * by route and status, their latency, and the outcome of every `/db` RPC (ok, a public
 * error code, overloaded or defect). Labels never carry ids, tokens or payloads.
 */
import { Effect, Metric, MetricBoundaries, MetricState } from "effect"

export const requests = Metric.counter("cairn_http_requests_total", {
  description: "HTTP requests answered by the front, by route and status",
  incremental: true
})

export const latency = Metric.histogram(
  "cairn_http_request_duration_ms",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 16 }),
  "Time from receiving a request to answering it, by route"
)

export const rpcOutcomes = Metric.counter("cairn_rpc_outcomes_total", {
  description: "Outcomes of /db RPCs: ok, a public error code, overloaded or defect",
  incremental: true
})

// Tagged metrics and their updates are built once per label set (the sets are closed: route
// patterns, statuses, RPC tags and outcomes), not on every request.
const requestsFor = new Map<string, Effect.Effect<void>>()
const latencyFor = new Map<string, Metric.Metric.Histogram<number>>()
const rpcFor = new Map<string, Effect.Effect<void>>()

/** Records one answered request. Unmatched paths share one label so callers cannot grow the label set. */
export const recordRequest = (route: string, status: number, millis: number): Effect.Effect<void> => {
  const key = `${route}\u0000${status}`
  let count = requestsFor.get(key)
  if (count === undefined) {
    count = Metric.increment(Metric.tagged(Metric.tagged(requests, "route", route), "status", String(status)))
    requestsFor.set(key, count)
  }
  let histogram = latencyFor.get(route)
  if (histogram === undefined) {
    histogram = Metric.tagged(latency, "route", route)
    latencyFor.set(route, histogram)
  }
  return Effect.zipRight(count, Metric.update(histogram, millis))
}

export const recordRpc = (rpc: string, outcome: string): Effect.Effect<void> => {
  const key = `${rpc}\u0000${outcome}`
  let count = rpcFor.get(key)
  if (count === undefined) {
    count = Metric.increment(Metric.tagged(Metric.tagged(rpcOutcomes, "rpc", rpc), "outcome", outcome))
    rpcFor.set(key, count)
  }
  return count
}

export interface MetricSample {
  readonly name: string
  readonly tags: Readonly<Record<string, string>>
  readonly count: number
  /** Histograms only: sum of the observed values. */
  readonly sum?: number
}

/** The current value of every Cairn metric, for the test hooks. */
export const snapshot: Effect.Effect<ReadonlyArray<MetricSample>> = Effect.map(Metric.snapshot, (pairs) =>
  pairs
    .filter((pair) => pair.metricKey.name.startsWith("cairn_"))
    .flatMap((pair): ReadonlyArray<MetricSample> => {
      const tags = Object.fromEntries(pair.metricKey.tags.map((t) => [t.key, t.value]))
      const state = pair.metricState
      if (MetricState.isCounterState(state)) return [{ name: pair.metricKey.name, tags, count: Number(state.count) }]
      if (MetricState.isGaugeState(state)) return [{ name: pair.metricKey.name, tags, count: Number(state.value) }]
      if (MetricState.isHistogramState(state)) return [{ name: pair.metricKey.name, tags, count: state.count, sum: state.sum }]
      return []
    })
    .sort((a, b) => (a.name + JSON.stringify(a.tags) < b.name + JSON.stringify(b.tags) ? -1 : 1))
)

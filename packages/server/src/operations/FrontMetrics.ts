/**
 * The front's request metrics (Effect metrics, so any exporter can ship them): requests
 * by route and status, their latency, and the outcome of every `/db` RPC (ok, a public
 * error code, overloaded or defect). Labels never carry ids, tokens or payloads.
 */
import { PublicErrorCodes } from "@cairn/domain/PublicError"
import { Effect, Metric, MetricBoundaries, MetricKey, type MetricKeyType, MetricLabel, MetricState } from "effect"

const requestsKey = MetricKey.counter("cairn_http_requests_total", {
  description: "HTTP requests answered by the front, by route and status",
  incremental: true
})
export const requests = Metric.fromMetricKey(requestsKey)

const latencyKey = MetricKey.histogram(
  "cairn_http_request_duration_ms",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 16 }),
  "Time from receiving a request to answering it, by route"
)
export const latency = Metric.fromMetricKey(latencyKey)

const rpcOutcomesKey = MetricKey.counter("cairn_rpc_outcomes_total", {
  description: "Outcomes of /db RPCs: ok, a public error code, overloaded or defect",
  incremental: true
})
export const rpcOutcomes = Metric.fromMetricKey(rpcOutcomesKey)

/**
 * The metric of `key` under fixed labels. `Metric.tagged` would build the tagged key and look
 * it up in the registry on every update; a metric made from the tagged key finds its state once.
 */
export const labelled = <Type extends MetricKeyType.MetricKeyType<any, any>>(
  key: MetricKey.MetricKey<Type>,
  labels: ReadonlyArray<readonly [string, string]>
) => Metric.fromMetricKey(MetricKey.taggedWithLabels(key, labels.map(([name, value]) => MetricLabel.make(name, value))))

// Labelled metrics and their updates are built once per label set (the sets are closed: route
// patterns, statuses, RPC tags and outcomes), not on every request.
const requestsFor = new Map<string, Effect.Effect<void>>()
const latencyFor = new Map<string, Metric.Metric.Histogram<number>>()
const rpcFor = new Map<string, Effect.Effect<void>>()

/** Records one answered request. Unmatched paths share one label so callers cannot grow the label set. */
export const recordRequest = (route: string, status: number, millis: number): Effect.Effect<void> => {
  const key = `${route}\u0000${status}`
  let count = requestsFor.get(key)
  if (count === undefined) {
    count = Metric.increment(labelled(requestsKey, [["route", route], ["status", String(status)]]))
    requestsFor.set(key, count)
  }
  let histogram = latencyFor.get(route)
  if (histogram === undefined) {
    histogram = labelled(latencyKey, [["route", route]])
    latencyFor.set(route, histogram)
  }
  return Effect.zipRight(count, Metric.update(histogram, millis))
}

export const recordRpc = (rpc: string, outcome: string): Effect.Effect<void> => {
  const key = `${rpc}\u0000${outcome}`
  let count = rpcFor.get(key)
  if (count === undefined) {
    count = Metric.increment(labelled(rpcOutcomesKey, [["rpc", rpc], ["outcome", outcome]]))
    rpcFor.set(key, count)
  }
  return count
}

/** What `recordRpc` counts besides `ok` and the public codes: the refusals by tag, and a defect. */
const rpcRefusalOutcomes = ["InsufficientScope", "Overloaded", "Unavailable", "defect"] as const

/**
 * The front's families at zero before any traffic, for `routes` (patterns) and `rpcs` (tags):
 * a series born at its first event gives `rate()` nothing to rise from, so the first 5xx
 * would never show. Requests by the statuses alerts watch (200 and the 5xx the front answers;
 * others appear as they happen), latency by route, and every RPC outcome.
 */
export const atZero = (routes: ReadonlyArray<string>, rpcs: ReadonlyArray<string>): Effect.Effect<void> =>
  Effect.all(
    [
      ...routes.flatMap((route) => [
        ...["200", "500", "503"].map((status) => Metric.value(labelled(requestsKey, [["route", route], ["status", status]]))),
        Metric.value(labelled(latencyKey, [["route", route]]))
      ]),
      ...rpcs.flatMap((rpc) =>
        ["ok", ...PublicErrorCodes, ...rpcRefusalOutcomes].map((outcome) => Metric.value(labelled(rpcOutcomesKey, [["rpc", rpc], ["outcome", outcome]])))
      )
    ],
    { discard: true }
  )

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

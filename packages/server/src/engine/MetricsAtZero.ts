/**
 * Every metric family the operator's endpoint exports, present at zero before any traffic,
 * with its known label values (resnapshots by reason, storage faults by kind, receipt outcomes,
 * verbs by transport, ...). Prometheus computes `rate()` and `increase()` from successive
 * samples: a series born at its first event has none before it, so the alert on that first
 * storage fault or resnapshot storm would never fire.
 */
import { dataRpcPath } from "@cairn/domain/DataRpcPath"
import * as StoreMetrics from "@cairn/store/StoreMetrics"
import * as SyncMetrics from "@cairn/sync/SyncMetrics"
import { Effect, Layer, Metric } from "effect"
import { escapedErrors, logWriteErrors } from "../operations/EscapedErrors.js"
import * as FrontMetrics from "../operations/FrontMetrics.js"
import { MetricFamilies } from "../operations/MetricsEndpoint.js"
import * as EngineMetrics from "./EngineMetrics.js"
import * as Objects from "./Objects.js"

/** The data plane's route patterns (as `FrontMiddleware` labels them) and their RPCs. */
const routes = [dataRpcPath, "/db/sync", "/mcp", "/db/objects", "/db/objects/:objectId", "/health"]
const rpcs = ["Describe", "Query", "Mutate", "SyncSnapshot", "SyncChanges"]

export const atZero: Effect.Effect<void> = Effect.all(
  [
    FrontMetrics.atZero(routes, rpcs),
    EngineMetrics.atZero,
    SyncMetrics.atZero,
    StoreMetrics.atZero,
    Metric.value(Metric.tagged(escapedErrors, "origin", "uncaughtException")),
    Metric.value(Metric.tagged(escapedErrors, "origin", "unhandledRejection")),
    Metric.value(logWriteErrors),
    Metric.value(Metric.tagged(Objects.uploads, "outcome", "ok")),
    Metric.value(Metric.tagged(Objects.downloads, "outcome", "ok")),
    Metric.value(Objects.storageFaults)
  ],
  { discard: true }
)

/** The families `MetricsEndpointLive` puts in its first scrape: every one Cairn's packages define. */
export const MetricFamiliesLive = Layer.succeed(MetricFamilies, { atZero })

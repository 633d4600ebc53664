/**
 * The operator's Prometheus endpoint: every `cairn_*` Effect metric, in the Prometheus text
 * format written by the OpenTelemetry Prometheus exporter, at `GET /metrics` on a listener of
 * its own (`CAIRN_METRICS_HOST`:`CAIRN_METRICS_PORT`, loopback by default), never on the
 * public port. Not configured, nothing listens. With `OperatorAdmin` provided (embedded), the same
 * listener serves the operator's per-database actions under `/admin/` (see `OperatorAdmin`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { PrometheusExporter } from "@opentelemetry/exporter-prometheus"
import type { MetricProducer } from "@opentelemetry/sdk-metrics"
import { Context, Effect, Layer, Option, Runtime } from "effect"
import { commonJs } from "../internal/commonJs.js"
import { adminHandler, OperatorAdmin, writeCredential } from "./OperatorAdmin.js"
import { OperatorSettings } from "./OperatorSettings.js"
import { Settings } from "./Settings.js"

type Route = (request: IncomingMessage, response: ServerResponse, path: string) => boolean

const loadOtel = async () => ({
  OtelMetrics: await import("@effect/opentelemetry/Metrics"),
  Resource: await import("@effect/opentelemetry/Resource"),
  PrometheusExporter: commonJs(await import("@opentelemetry/exporter-prometheus")).PrometheusExporter
})

const listen = (host: string, port: number, exporter: PrometheusExporter, routes: { admin?: Route }) =>
  Effect.acquireRelease(
    Effect.flatMap(Effect.runtime<never>(), (runtime) => Effect.async<Server, Error>((resume) => {
      const server = createServer((request, response) => {
        const path = (request.url ?? "").split("?")[0]
        if (request.method === "GET" && path === "/metrics") {
          exporter.getMetricsRequestHandler(request, response)
          return
        }
        if (routes.admin?.(request, response, path ?? "")) return
        response.writeHead(404, { "content-type": "text/plain" }).end("Only GET /metrics (and the operator's /admin/ actions) is served here.\n")
      })
      let listening = false
      // Before listening, a failure to start; after, logged: an unheard 'error' would exit the process.
      server.on("error", (error) =>
        listening ? Runtime.runFork(runtime)(Effect.logError("the metrics listener failed", error)) : resume(Effect.fail(error))
      )
      server.listen(port, host, () => {
        listening = true
        resume(Effect.succeed(server))
      })
    })),
    (server) => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )

/**
 * Every metric family the endpoint exports, set at zero with its known label values before the
 * first scrape (`engine/MetricsAtZero`): the families live in the folders above this one.
 */
export class MetricFamilies extends Context.Tag("@cairn/server/operations/MetricFamilies")<
  MetricFamilies,
  { readonly atZero: Effect.Effect<void> }
>() {}

/** Serves the endpoint when `CAIRN_METRICS_PORT` is set. Needs `OperatorSettings` and `MetricFamilies`. */
export const MetricsEndpointLive = Layer.unwrapEffect(
  Effect.map(OperatorSettings, (settings) =>
    Option.match(settings.metrics, {
      onNone: () => Layer.empty,
      onSome: ({ host, port }) =>
        // Loaded only when the endpoint is configured: the OpenTelemetry SDK weighs on every start otherwise.
        Layer.unwrapEffect(Effect.map(Effect.promise(loadOtel), ({ OtelMetrics, Resource, PrometheusExporter }) =>
        Layer.scopedDiscard(
          Effect.gen(function* () {
            // No timestamps and no `target_info`: the scrape is the metrics and their help text only.
            const exporter = new PrometheusExporter({ preventServerStart: true, withoutTargetInfo: true })
            // Every family in the first scrape, at zero: alerts on rate() need a sample before the first event.
            yield* (yield* MetricFamilies).atZero
            const effectProducer = yield* OtelMetrics.makeProducer
            // Only Cairn's own metrics: the runtime's `effect_fiber_*` are not part of the operator's contract.
            const producer: MetricProducer = {
              collect: (options) =>
                effectProducer.collect(options).then((collected) => ({
                  ...collected,
                  resourceMetrics: {
                    ...collected.resourceMetrics,
                    scopeMetrics: collected.resourceMetrics.scopeMetrics.map((scope) => ({
                      ...scope,
                      // Units are in the names (`_ms`, `_bytes`); Effect's placeholder unit "1" would only add `# UNIT` noise.
                      metrics: scope.metrics
                        .filter((metric) => metric.descriptor.name.startsWith("cairn_"))
                        .map((metric) => ({ ...metric, descriptor: { ...metric.descriptor, unit: "" } }))
                    }))
                  }
                }))
            }
            yield* OtelMetrics.registerProducer(producer, () => exporter)
            const routes: { admin?: Route } = {}
            const server = yield* listen(host, port, exporter, routes).pipe(
              Effect.mapError((error) => new Error(`the metrics listener cannot bind ${host}:${port} (${error.message})`)),
              Effect.orDie
            )
            const bound = server.address() as AddressInfo
            const url = `http://${host.includes(":") ? `[${host}]` : host}:${bound.port}`
            yield* Effect.logInfo(`Cairn metrics at ${url}/metrics`)
            const admin = yield* Effect.serviceOption(OperatorAdmin)
            if (Option.isSome(admin)) {
              const { dataDir } = yield* Settings
              const credential = yield* writeCredential(dataDir, url)
              routes.admin = adminHandler(admin.value, credential.token, yield* Effect.runtime<never>())
            }
          })
        ).pipe(Layer.provide(Resource.layer({ serviceName: "cairn" })))))
    })
  )
)

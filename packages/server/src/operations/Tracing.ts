/**
 * Trace export: when the operator names an OTLP/HTTP endpoint (`CAIRN_OTLP_ENDPOINT` or the
 * standard `OTEL_EXPORTER_OTLP_ENDPOINT`), every span Effect creates — the front's request
 * span, the engine verb, the activation, the writer group (linked from each invocation's
 * request) — is exported as OTLP JSON to `<endpoint>/v1/traces` by `@effect/opentelemetry`.
 * Each attribute and failure passes the one redaction rule first; `CAIRN_TRACE_SAMPLE_RATIO`
 * keeps that share of traces (decided at the root, inherited by children). Without an
 * endpoint nothing is installed: Effect's built-in spans stay in memory only.
 */
import { FetchHttpClient } from "@effect/platform"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import { Effect, Exit, Layer, Option, Tracer } from "effect"
import { OperatorSettings } from "./OperatorSettings.js"
import * as Redaction from "@cairn/domain/Redaction"

type MutableSpan = {
  -readonly [K in keyof Tracer.Span]: Tracer.Span[K]
}

/** `inner` with redacted attributes and failures, and head sampling at `ratio`. */
export const redacting = (inner: Tracer.Tracer, ratio: number): Tracer.Tracer =>
  Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const span = inner.span(name, parent, context, links, startTime, kind, options) as MutableSpan
      const sampled = Option.match(parent, {
        onNone: () => ratio >= 1 || Math.random() < ratio,
        onSome: (p) => p.sampled
      })
      const attribute = span.attribute.bind(span)
      span.attribute = (key, value) => attribute(key, Redaction.field(key, value))
      if (!sampled) {
        span.sampled = false
        // Ended, never exported: children see `sampled: false` and follow.
        span.end = (endTime, exit) => {
          span.status = { _tag: "Ended", startTime: span.status.startTime, endTime, exit }
        }
        return span
      }
      const end = span.end.bind(span)
      span.end = (endTime, exit) => end(endTime, Exit.isFailure(exit) ? Exit.failCause(Redaction.cause(exit.cause)) : exit)
      return span
    },
    context: inner.context
  })

const exporting = (endpoint: string, ratio: number) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      const inner = yield* OtlpTracer.make({
        url: `${endpoint}/v1/traces`,
        resource: { serviceName: "cairn" },
        exportInterval: "1 second"
      })
      yield* Effect.logInfo(`Cairn exports traces to ${endpoint}/v1/traces (sampling ${ratio})`)
      return Layer.setTracer(redacting(inner, ratio))
    })
  ).pipe(Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]))

/** The tracer for the operator's settings: OTLP export when an endpoint is set, else nothing. Needs `OperatorSettings`. */
export const TracingLive = Layer.unwrapEffect(
  Effect.map(OperatorSettings, (settings) =>
    Option.match(settings.otlpEndpoint, {
      onNone: () => Layer.empty,
      onSome: (endpoint) => exporting(endpoint, settings.traceSampleRatio)
    })
  )
)

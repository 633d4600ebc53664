/**
 * The operator's settings for routes (MCP and sync on or off), observability (the metrics
 * listener, trace export and sampling) and compatibility (which MCP protocol versions the
 * deployment accepts). Read through `Config` at startup with every other setting, so a bad
 * value stops the start with the others.
 */
import { Config, Context, Layer, Option } from "effect"

export interface OperatorSettingsShape {
  /** `/mcp` and its discovery documents are served (`CAIRN_MCP`, default on). */
  readonly mcp: boolean
  /** `/db/sync` is served (`CAIRN_SYNC`, default on); off, it is a plain 404 behind the gate. */
  readonly sync: boolean
  /** The Prometheus listener (`CAIRN_METRICS_PORT`), absent when not configured; never the public port. */
  readonly metrics: Option.Option<{ readonly host: string; readonly port: number }>
  /** Where spans go over OTLP/HTTP (`CAIRN_OTLP_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT`); none: no export. */
  readonly otlpEndpoint: Option.Option<string>
  /** The share of requests traced, 0 to 1 (`CAIRN_TRACE_SAMPLE_RATIO`, default 1). */
  readonly traceSampleRatio: number
  /** Compatibility: the MCP protocol versions accepted (`CAIRN_MCP_PROTOCOL_VERSIONS`); none set, every one the server implements. */
  readonly mcpProtocolVersions: Option.Option<ReadonlyArray<string>>
}

const onOff = (name: string) =>
  Config.literal("on", "off")(name).pipe(
    Config.withDefault("on" as const),
    Config.map((v) => v === "on")
  )

const port = (name: string) =>
  Config.integer(name).pipe(Config.validate({ message: `${name} must be a TCP port between 0 and 65535`, validation: (n) => n >= 0 && n <= 65535 }))

const url = (name: string) =>
  Config.string(name).pipe(Config.validate({ message: `${name} must be an absolute http(s) URL`, validation: (s) => /^https?:\/\/[^/]+/.test(s) }))

export const operatorSettingsConfig: Config.Config<OperatorSettingsShape> = Config.all({
  mcp: onOff("CAIRN_MCP"),
  sync: onOff("CAIRN_SYNC"),
  metricsPort: Config.option(port("CAIRN_METRICS_PORT")),
  metricsHost: Config.string("CAIRN_METRICS_HOST").pipe(Config.withDefault("127.0.0.1")),
  publicPort: Config.integer("CAIRN_PORT").pipe(Config.withDefault(8787)),
  otlpEndpoint: Config.option(url("CAIRN_OTLP_ENDPOINT").pipe(Config.orElse(() => url("OTEL_EXPORTER_OTLP_ENDPOINT")))),
  traceSampleRatio: Config.number("CAIRN_TRACE_SAMPLE_RATIO").pipe(
    Config.validate({ message: "CAIRN_TRACE_SAMPLE_RATIO must be a number from 0 to 1", validation: (n) => n >= 0 && n <= 1 }),
    Config.withDefault(1)
  ),
  mcpProtocolVersions: Config.option(
    Config.array(Config.string(), "CAIRN_MCP_PROTOCOL_VERSIONS").pipe(
      Config.map((versions) => versions.map((v) => v.trim()).filter((v) => v !== "")),
      Config.validate({
        message: "CAIRN_MCP_PROTOCOL_VERSIONS must list protocol versions as dates (e.g. 2025-06-18), comma separated",
        validation: (versions) => versions.length > 0 && versions.every((v) => /^\d{4}-\d{2}-\d{2}$/.test(v))
      })
    )
  )
}).pipe(
  Config.validate({
    message: "CAIRN_METRICS_PORT must differ from CAIRN_PORT: metrics are never served on the public port",
    validation: (raw) => Option.isNone(raw.metricsPort) || raw.metricsPort.value === 0 || raw.metricsPort.value !== raw.publicPort
  }),
  Config.map((raw) => ({
    mcp: raw.mcp,
    sync: raw.sync,
    metrics: Option.map(raw.metricsPort, (port) => ({ host: raw.metricsHost, port })),
    otlpEndpoint: Option.map(raw.otlpEndpoint, (endpoint) => endpoint.replace(/\/+$/, "")),
    traceSampleRatio: raw.traceSampleRatio,
    mcpProtocolVersions: raw.mcpProtocolVersions
  }))
)

export class OperatorSettings extends Context.Tag("@cairn/server/OperatorSettings")<OperatorSettings, OperatorSettingsShape>() {
  static readonly layerConfig = Layer.effect(OperatorSettings, operatorSettingsConfig)
  static readonly layer = (settings: OperatorSettingsShape) => Layer.succeed(OperatorSettings, settings)
}

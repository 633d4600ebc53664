// Operator settings for routes, observability and sampling are read and checked at startup with
// every other setting: bad values are listed together, by name; good ones parse as documented.
import { assert, describe, it } from "@effect/vitest"
import { describeConfigError, allSettings } from "@cairn/server/Startup"
import { operatorSettingsConfig } from "@cairn/server/operations/OperatorSettings"
import { ConfigProvider, Effect, Option } from "effect"

const read = <A, E>(config: Effect.Effect<A, E>, env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("operator settings", () => {
  it.effect("defaults: MCP and sync on, no metrics listener, no trace export, every trace kept", () =>
    Effect.gen(function* () {
      const parsed = yield* read(operatorSettingsConfig, {})
      assert.isTrue(parsed._tag === "Right")
      if (parsed._tag !== "Right") return
      assert.isTrue(parsed.right.mcp)
      assert.isTrue(parsed.right.sync)
      assert.isTrue(Option.isNone(parsed.right.metrics))
      assert.isTrue(Option.isNone(parsed.right.otlpEndpoint))
      assert.strictEqual(parsed.right.traceSampleRatio, 1)
    }))

  it.effect("set: a loopback metrics listener, the standard OTLP variable, sampling, routes off", () =>
    Effect.gen(function* () {
      const parsed = yield* read(operatorSettingsConfig, {
        CAIRN_METRICS_PORT: "9464",
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        CAIRN_TRACE_SAMPLE_RATIO: "0.25",
        CAIRN_MCP: "off",
        CAIRN_SYNC: "off",
        CAIRN_MCP_PROTOCOL_VERSIONS: "2025-06-18, 2025-03-26"
      })
      assert.isTrue(parsed._tag === "Right")
      if (parsed._tag !== "Right") return
      assert.deepStrictEqual(Option.getOrUndefined(parsed.right.metrics), { host: "127.0.0.1", port: 9464 })
      assert.strictEqual(Option.getOrUndefined(parsed.right.otlpEndpoint), "http://collector:4318")
      assert.strictEqual(parsed.right.traceSampleRatio, 0.25)
      assert.isFalse(parsed.right.mcp)
      assert.isFalse(parsed.right.sync)
      assert.deepStrictEqual(Option.getOrUndefined(parsed.right.mcpProtocolVersions), ["2025-06-18", "2025-03-26"])
    }))

  it.effect("bad values are listed together with the other settings' problems, by name", () =>
    Effect.gen(function* () {
      const checked = yield* read(allSettings, {
        CAIRN_METRICS_PORT: "99999",
        CAIRN_TRACE_SAMPLE_RATIO: "2",
        CAIRN_MCP: "maybe",
        CAIRN_OTLP_ENDPOINT: "ftp://collector",
        CAIRN_MCP_PROTOCOL_VERSIONS: "latest",
        CAIRN_MAX_BODY_BYTES: "-1"
      })
      assert.isTrue(checked._tag === "Left")
      if (checked._tag !== "Left") return
      const lines = describeConfigError(checked.left).join("\n")
      for (const name of ["CAIRN_METRICS_PORT", "CAIRN_TRACE_SAMPLE_RATIO", "CAIRN_MCP", "CAIRN_OTLP_ENDPOINT", "CAIRN_MCP_PROTOCOL_VERSIONS", "CAIRN_MAX_BODY_BYTES"]) {
        assert.include(lines, name)
      }
    }))

  it.effect("the metrics listener never shares the public port", () =>
    Effect.gen(function* () {
      const checked = yield* read(operatorSettingsConfig, { CAIRN_PORT: "8787", CAIRN_METRICS_PORT: "8787" })
      assert.isTrue(checked._tag === "Left")
      if (checked._tag !== "Left") return
      assert.include(describeConfigError(checked.left).join("\n"), "CAIRN_METRICS_PORT must differ from CAIRN_PORT")
    }))
})

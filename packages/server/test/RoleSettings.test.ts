// The role and the cluster's settings are read with every other setting at startup: the embedded
// default needs none of them; a cluster role lists every missing or bad one together, by name.
import { assert, describe, it } from "@effect/vitest"
import { allSettings, describeConfigError } from "@cairn/server/Startup"
import { roleSettingsConfig } from "@cairn/server/operations/RoleSettings"
import { ConfigProvider, Duration, Effect, Option, Redacted } from "effect"

const read = <A, E>(config: Effect.Effect<A, E>, env: Record<string, string>) =>
  Effect.either(Effect.withConfigProvider(config, ConfigProvider.fromMap(new Map(Object.entries(env)))))

const secret = "s".repeat(32)

describe("role settings", () => {
  it.effect("embedded by default, with no cluster settings", () =>
    Effect.gen(function* () {
      const parsed = yield* read(roleSettingsConfig, {})
      assert.isTrue(parsed._tag === "Right" && parsed.right.role === "embedded" && Option.isNone(parsed.right.cluster))
    }))

  it.effect("a runner: its address, the cluster's PostgreSQL and timings", () =>
    Effect.gen(function* () {
      const parsed = yield* read(roleSettingsConfig, {
        CAIRN_ROLE: "runner",
        CAIRN_CLUSTER_DATABASE_URL: "postgres://127.0.0.1:5432/cairn",
        CAIRN_SECRET: secret,
        CAIRN_RUNNER_PORT: "34431",
        CAIRN_CLUSTER_SHARDS: "16",
        CAIRN_CLUSTER_LOCK_EXPIRATION: "3 seconds",
        CAIRN_OBJECT_DIR: "/srv/cairn-objects"
      })
      assert.isTrue(parsed._tag === "Right")
      if (parsed._tag !== "Right" || Option.isNone(parsed.right.cluster)) return assert.fail("a runner has cluster settings")
      const cluster = parsed.right.cluster.value
      assert.strictEqual(Redacted.value(cluster.databaseUrl), "postgres://127.0.0.1:5432/cairn")
      assert.deepStrictEqual(Option.getOrUndefined(cluster.runnerAddress), { host: "127.0.0.1", port: 34431 })
      assert.strictEqual(cluster.shards, 16)
      assert.isTrue(Duration.equals(cluster.lockExpiration, Duration.seconds(3)))
    }))

  it.effect("a front has no runner address and needs no port", () =>
    Effect.gen(function* () {
      const parsed = yield* read(roleSettingsConfig, { CAIRN_ROLE: "front", CAIRN_CLUSTER_DATABASE_URL: "postgres://x/y", CAIRN_SECRET: secret, CAIRN_OBJECT_STORE: "s3" })
      assert.isTrue(parsed._tag === "Right" && Option.isSome(parsed.right.cluster) && Option.isNone(parsed.right.cluster.value.runnerAddress))
    }))

  it.effect("a cluster role needs an object store every process shares: not each data directory's own", () =>
    Effect.gen(function* () {
      const parsed = yield* read(roleSettingsConfig, { CAIRN_ROLE: "replica", CAIRN_CLUSTER_DATABASE_URL: "postgres://x/y", CAIRN_SECRET: secret })
      assert.isTrue(parsed._tag === "Left")
      if (parsed._tag !== "Left") return
      assert.include(describeConfigError(parsed.left).join("\n"), "CAIRN_ROLE=replica needs an object store every process shares")
      const shared = yield* read(roleSettingsConfig, { CAIRN_ROLE: "replica", CAIRN_CLUSTER_DATABASE_URL: "postgres://x/y", CAIRN_SECRET: secret, CAIRN_OBJECT_DIR: "/srv/o" })
      assert.isTrue(shared._tag === "Right")
    }))

  it.effect("a runner without its settings: every problem listed together with the others'", () =>
    Effect.gen(function* () {
      const checked = yield* read(allSettings, { CAIRN_ROLE: "runner", CAIRN_CLUSTER_LOCK_EXPIRATION: "soon", CAIRN_PORT: "x" })
      assert.isTrue(checked._tag === "Left")
      if (checked._tag !== "Left") return
      const lines = describeConfigError(checked.left).join("\n")
      for (const name of ["CAIRN_CLUSTER_DATABASE_URL is required for CAIRN_ROLE=runner", "CAIRN_SECRET is required for CAIRN_ROLE=runner", "CAIRN_RUNNER_PORT is required for CAIRN_ROLE=runner", "CAIRN_CLUSTER_LOCK_EXPIRATION", "CAIRN_PORT"]) {
        assert.include(lines, name)
      }
    }))

  it.effect("an unknown role and a short secret are refused by name", () =>
    Effect.gen(function* () {
      const unknown = yield* read(roleSettingsConfig, { CAIRN_ROLE: "leader" })
      assert.isTrue(unknown._tag === "Left" && describeConfigError(unknown.left).join("\n").includes("CAIRN_ROLE"))
      const short = yield* read(roleSettingsConfig, { CAIRN_ROLE: "front", CAIRN_CLUSTER_DATABASE_URL: "postgres://x/y", CAIRN_SECRET: "short" })
      assert.isTrue(short._tag === "Left" && describeConfigError(short.left).join("\n").includes("CAIRN_SECRET must be at least 32 characters"))
    }))
})

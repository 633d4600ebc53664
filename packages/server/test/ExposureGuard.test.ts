// The exposure guard: a loopback deployment starts with nothing configured; a public one
// (bind host or base URL) starts only with an external issuer and explicit budgets, and
// otherwise fails with one message naming exactly what is missing.
import { assert, describe, it } from "@effect/vitest"
import { DescribeLimits } from "@cairn/catalog/Describe"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { exposureGuard, ExposureGuardLive, isPublic } from "../src/auth/ExposureGuard.js"
import { Settings, settingsConfig } from "../src/operations/Settings.js"

const run = (env: Record<string, string>) =>
  Effect.gen(function* () {
    const settings = yield* settingsConfig
    return yield* exposureGuard.pipe(Effect.provide(Settings.layer(settings)))
  }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))), Effect.exit)

const messageOf = (exit: Exit.Exit<unknown, unknown>): string => {
  assert.isTrue(Exit.isFailure(exit), "the guard should have refused")
  if (Exit.isSuccess(exit)) return ""
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  assert.strictEqual((failure as { _tag?: string })?._tag, "ExposureRefused")
  return (failure as { message: string }).message
}

const ready = {
  CAIRN_ISSUER: "https://login.example.com/",
  CAIRN_QUERY_MAX_PAGE_SIZE: "100",
  CAIRN_QUERY_MAX_ROWS_EXAMINED: "10000",
  CAIRN_DISCOVERY_MAX_LIMIT: "50"
}

describe("ExposureGuard", () => {
  it("tells loopback from public hosts", () => {
    assert.isFalse(isPublic({ host: "127.0.0.1", baseUrl: "http://localhost:8787" }))
    assert.isFalse(isPublic({ host: "::1", baseUrl: "http://[::1]:8787" }))
    assert.isFalse(isPublic({ host: "127.0.0.2", baseUrl: "http://127.0.0.1:8787" }))
    assert.isTrue(isPublic({ host: "0.0.0.0", baseUrl: "http://127.0.0.1:8787" }))
    assert.isTrue(isPublic({ host: "::", baseUrl: "http://127.0.0.1:8787" }))
    assert.isTrue(isPublic({ host: "127.0.0.1", baseUrl: "https://cairn.example.com" }))
    assert.isTrue(isPublic({ host: "127.0.0.1", baseUrl: "http://localhost.example.com:8787" }))
  })

  it.effect("a loopback deployment starts with nothing configured", () =>
    Effect.gen(function* () {
      const exit = yield* run({})
      assert.isTrue(Exit.isSuccess(exit))
    })
  )

  it.effect("a public bind without issuer and budgets is refused with the exact list of what is missing", () =>
    Effect.gen(function* () {
      const message = messageOf(yield* run({ CAIRN_HOST: "0.0.0.0", CAIRN_PORT: "8787" }))
      assert.strictEqual(
        message,
        "Refusing to start: the MCP endpoint would be reachable publicly (bind host 0.0.0.0, base URL http://0.0.0.0:8787) " +
          "without an external OAuth issuer (set CAIRN_ISSUER and its keys; the development authorization server is for loopback only); " +
          "and without explicit query budgets (CAIRN_QUERY_MAX_PAGE_SIZE is not set, CAIRN_QUERY_MAX_ROWS_EXAMINED is not set); " +
          "and without explicit discovery budgets (CAIRN_DISCOVERY_MAX_LIMIT is not set). " +
          "Configure these, or bind and advertise a loopback address."
      )
    })
  )

  it.effect("a public base URL counts as public even on a loopback bind; each missing item is named alone", () =>
    Effect.gen(function* () {
      const base = { CAIRN_BASE_URL: "https://cairn.example.com" }
      const noIssuer = messageOf(yield* run({ ...base, ...ready, CAIRN_ISSUER: "" }))
      assert.include(noIssuer, "without an external OAuth issuer (set CAIRN_ISSUER")
      assert.notInclude(noIssuer, "budgets")

      const { CAIRN_DISCOVERY_MAX_LIMIT: _, ...noDiscovery } = ready
      const discovery = messageOf(yield* run({ ...base, ...noDiscovery }))
      assert.include(discovery, "without explicit discovery budgets (CAIRN_DISCOVERY_MAX_LIMIT is not set)")
      assert.notInclude(discovery, "CAIRN_ISSUER")
      assert.notInclude(discovery, "CAIRN_QUERY")

      const { CAIRN_QUERY_MAX_ROWS_EXAMINED: __, ...noRows } = ready
      const invalid = messageOf(yield* run({ ...base, ...noRows, CAIRN_QUERY_MAX_PAGE_SIZE: "-1" }))
      assert.include(
        invalid,
        "without explicit query budgets (CAIRN_QUERY_MAX_PAGE_SIZE must be a positive integer, CAIRN_QUERY_MAX_ROWS_EXAMINED is not set)"
      )
    })
  )

  it.effect("a public deployment with an external issuer and explicit budgets starts", () =>
    Effect.gen(function* () {
      const exit = yield* run({ CAIRN_HOST: "0.0.0.0", CAIRN_BASE_URL: "https://cairn.example.com", ...ready })
      assert.isTrue(Exit.isSuccess(exit))
    })
  )

  it.effect("as a layer it stops the application from building", () =>
    Effect.gen(function* () {
      const settings = yield* settingsConfig
      const exit = yield* Layer.build(ExposureGuardLive.pipe(Layer.provide(Settings.layer(settings)))).pipe(Effect.scoped, Effect.exit)
      assert.isTrue(Exit.isFailure(exit))
    }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_HOST", "0.0.0.0"]]))))
  )

  it.effect("discovery budgets reach the describe engine's limits", () =>
    Effect.gen(function* () {
      const limits = yield* DescribeLimits.pipe(
        Effect.provide(DescribeLimits.layerConfig),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_DISCOVERY_MAX_LIMIT", "40"], ["CAIRN_DISCOVERY_DEFAULT_LIMIT", "10"]])))
      )
      assert.deepStrictEqual(limits, { defaultLimit: 10, maxLimit: 40 })
      const refused = yield* Effect.exit(
        DescribeLimits.pipe(
          Effect.provide(DescribeLimits.layerConfig),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_DISCOVERY_MAX_LIMIT", "5"]])))
        )
      )
      assert.isTrue(Exit.isFailure(refused))
    })
  )
})

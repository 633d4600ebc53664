// The exposure guard: a loopback deployment starts with nothing configured; a public one
// (bind host or base URL) starts only with an external issuer and explicit budgets, and
// otherwise fails with one message naming exactly what is missing.
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { exposureGuard, ExposureGuardLive, isPublic, parseBudgets } from "../src/ExposureGuard.js"
import { Settings, settingsConfig } from "../src/Settings.js"

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
  CAIRN_QUERY_BUDGETS: "pageSize=100,rowsExamined=10000",
  CAIRN_DISCOVERY_BUDGETS: "maxLimit=50"
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

  it("parses budgets strictly", () => {
    assert.deepStrictEqual(parseBudgets("maxLimit=50, defaultLimit=20"), { maxLimit: 50, defaultLimit: 20 })
    assert.strictEqual(parseBudgets(""), "it is empty")
    assert.strictEqual(parseBudgets("maxLimit=0"), `"maxLimit=0" is not name=<positive integer>`)
    assert.strictEqual(parseBudgets("maxLimit=lots"), `"maxLimit=lots" is not name=<positive integer>`)
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
          "without an external OAuth issuer (set CAIRN_ISSUER; the development authorization server is for loopback only); " +
          "and without explicit query budgets (set CAIRN_QUERY_BUDGETS, e.g. pageSize=100,rowsExamined=10000); " +
          "and without explicit discovery budgets (set CAIRN_DISCOVERY_BUDGETS, e.g. maxLimit=50). " +
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

      const { CAIRN_DISCOVERY_BUDGETS: _, ...noDiscovery } = ready
      const discovery = messageOf(yield* run({ ...base, ...noDiscovery }))
      assert.include(discovery, "without explicit discovery budgets (set CAIRN_DISCOVERY_BUDGETS")
      assert.notInclude(discovery, "CAIRN_ISSUER")
      assert.notInclude(discovery, "CAIRN_QUERY_BUDGETS")

      const invalid = messageOf(yield* run({ ...base, ...ready, CAIRN_QUERY_BUDGETS: "pageSize=-1" }))
      assert.include(invalid, `without valid query budgets (CAIRN_QUERY_BUDGETS: "pageSize=-1" is not name=<positive integer>`)
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
})

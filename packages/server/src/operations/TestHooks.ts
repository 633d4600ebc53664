/**
 * Test hooks: test-only routes under `/__test` that exist only when `CAIRN_TEST_HOOKS`
 * is exactly `1` and `CAIRN_STAGE` is explicitly set to a known non-production stage (an
 * unset stage is not "development" here). Production keeps them off whatever the flag
 * says; a misconfigured guard keeps them off and is logged. The guard is a required
 * service: routes that could expose hooks cannot be built without it.
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { escapeOnce } from "./EscapedErrors.js"
import * as FrontMetrics from "./FrontMetrics.js"
import { Settings, type SettingsShape } from "./Settings.js"

export interface TestHooksDecision {
  readonly enabled: boolean
  /** Why, for the log; absent when the flag is simply not set. */
  readonly reason?: string
}

/** The guard: both the exact flag and a known non-production stage, or nothing. */
export const decide = (settings: SettingsShape): TestHooksDecision => {
  const flag = settings.testHooksSetting
  if (flag === undefined) return { enabled: false }
  if (!settings.stageExplicit) {
    return {
      enabled: false,
      reason: "Test hooks stay off: CAIRN_STAGE is not set. They need CAIRN_TEST_HOOKS=1 and an explicitly set non-production stage."
    }
  }
  if (settings.stage === "production") {
    return { enabled: false, reason: "Test hooks stay off: they never run in stage production, whatever CAIRN_TEST_HOOKS says." }
  }
  if (settings.stage === undefined) {
    return {
      enabled: false,
      reason: `Test hooks stay off: CAIRN_STAGE ${JSON.stringify(settings.stageSetting.slice(0, 32))} is not a known stage (development, test, staging, production).`
    }
  }
  if (flag !== "1") {
    return {
      enabled: false,
      reason: `Test hooks stay off: CAIRN_TEST_HOOKS is ${JSON.stringify(flag.slice(0, 16))}; only exactly "1" enables them.`
    }
  }
  return { enabled: true, reason: `Test hooks are ON (stage ${settings.stage}): test-only routes under /__test are served.` }
}

export class TestHooks extends Effect.Service<TestHooks>()("@cairn/server/TestHooks", {
  effect: Effect.gen(function* () {
    const decision = decide(yield* Settings)
    // Warning either way: hooks that are on, or a guard that was meant to turn them on, deserve attention.
    if (decision.reason !== undefined) yield* Effect.logWarning(decision.reason)
    return { enabled: decision.enabled }
  })
}) {}

/** `GET /__test/metrics`: every Cairn metric (request counts and latency by route, RPC outcomes). */
const MetricsRoute = HttpLayerRouter.add(
  "GET",
  "/__test/metrics",
  Effect.map(FrontMetrics.snapshot, (metrics) =>
    HttpServerResponse.unsafeJson({ metrics }, { headers: { "cache-control": "no-store" } })
  )
)

/**
 * `POST /__test/escape`: an `error` event nobody listens to, fired outside any request, as a stray
 * stream's would be; the process guard (`EscapedErrors`) must log and count it, and keep serving.
 */
const EscapeRoute = HttpLayerRouter.add(
  "POST",
  "/__test/escape",
  Effect.sync(() => {
    escapeOnce()
    return HttpServerResponse.unsafeJson({ fired: true }, { status: 202, headers: { "cache-control": "no-store" } })
  })
)

/** The test-only routes, mounted only when the guard allows them (otherwise they do not exist: 404). Needs `TestHooks`. */
export const TestHookRoutes = Layer.unwrapEffect(Effect.map(TestHooks, (hooks) => (hooks.enabled ? Layer.merge(MetricsRoute, EscapeRoute) : Layer.empty)))

// The test-hook guard against a real server for every combination of CAIRN_TEST_HOOKS and
// stage, CAIRN_STAGE unset included: the /__test routes exist only for exactly "1" in an
// explicitly set, known non-production stage, and every refusal of a flag that is set is
// logged with its reason.
import { describe, expect, it } from "@effect/vitest"
import { decide } from "@cairn/server/operations/TestHooks"
import { settingsConfig } from "@cairn/server/operations/Settings"
import { ConfigProvider, Effect } from "effect"
import { startFront } from "./FrontStack.js"

interface Metrics {
  readonly metrics: ReadonlyArray<{ readonly name: string; readonly tags: Record<string, string>; readonly count: number }>
}

const flags = [undefined, "1", "true", "1 ", "0"] as const
const stages = [null, "development", "test", "staging", "production", "prod"] as const

const expectedReason = (flag: string | undefined, stage: string | null): string | undefined => {
  if (flag === undefined) return undefined
  if (stage === null) return "CAIRN_STAGE is not set"
  if (stage === "production") return "they never run in stage production"
  if (stage === "prod") return 'CAIRN_STAGE "prod" is not a known stage'
  if (flag !== "1") return `CAIRN_TEST_HOOKS is ${JSON.stringify(flag)}; only exactly "1" enables them`
  return `Test hooks are ON (stage ${stage})`
}

describe("test hooks", () => {
  for (const stage of stages) {
    for (const flag of flags) {
      const enabled = flag === "1" && stage !== null && ["development", "test", "staging"].includes(stage)
      it.scopedLive(`stage ${stage ?? "unset"}, CAIRN_TEST_HOOKS ${JSON.stringify(flag)}: ${enabled ? "on" : "off"}`, () =>
        Effect.gen(function* () {
          const front = yield* startFront({ stage, ...(flag !== undefined ? { testHooks: flag } : {}) })
          const answer = yield* Effect.promise(() => fetch(`${front.base}/__test/metrics`))
          expect(answer.status).toBe(enabled ? 200 : 404)
          const hookLines = front.logs().filter((line) => line.includes("Test hooks"))
          const reason = expectedReason(flag, stage)
          if (reason === undefined) {
            expect(hookLines).toEqual([])
          } else {
            expect(hookLines).toHaveLength(1)
            expect(hookLines[0]).toContain("level=WARN")
            expect(hookLines[0]).toContain(JSON.stringify(reason).slice(1, -1))
          }
        })
      )
    }
  }

  it.effect("from the environment: CAIRN_TEST_HOOKS=1 alone (no CAIRN_STAGE) keeps hooks off", () =>
    Effect.gen(function* () {
      const read = (env: ReadonlyArray<readonly [string, string]>) =>
        Effect.withConfigProvider(settingsConfig, ConfigProvider.fromMap(new Map(env)))
      const flagOnly = yield* read([["CAIRN_TEST_HOOKS", "1"]])
      expect(flagOnly.stage).toBe("development")
      expect(flagOnly.stageExplicit).toBe(false)
      expect(decide(flagOnly).enabled).toBe(false)
      expect(decide(yield* read([["CAIRN_TEST_HOOKS", "1"], ["CAIRN_STAGE", "development"]])).enabled).toBe(true)
      expect(decide(yield* read([["CAIRN_TEST_HOOKS", "1"], ["CAIRN_STAGE", "production"]])).enabled).toBe(false)
      expect(decide(yield* read([["CAIRN_STAGE", "test"]])).enabled).toBe(false)
    })
  )

  it.scopedLive("GET /__test/metrics reports requests by route and status and RPC outcomes", () =>
    Effect.gen(function* () {
      const front = yield* startFront({ testHooks: "1" })
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const read = Effect.promise(async () => {
        const response = await fetch(`${front.base}/__test/metrics`)
        return (await response.json()) as Metrics
      })
      const count = (metrics: Metrics, name: string, tags: Record<string, string>) =>
        metrics.metrics
          .filter((m) => m.name === name && Object.entries(tags).every(([k, v]) => m.tags[k] === v))
          .reduce((sum, m) => sum + m.count, 0)
      const before = yield* read
      for (const payload of [{ browse: { kinds: ["entity"] } }, { search: "task" }]) {
        yield* Effect.promise(() =>
          fetch(front.rpcUrl, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ _tag: "Request", id: "1", tag: "Describe", payload, headers: [] })
          }).then((r) => r.text())
        )
      }
      yield* Effect.promise(() => fetch(front.rpcUrl, { method: "POST", body: "{}" }).then((r) => r.text()))
      const after = yield* read
      const delta = (name: string, tags: Record<string, string>) => count(after, name, tags) - count(before, name, tags)
      expect(delta("cairn_http_requests_total", { route: "/db/rpc", status: "200" })).toBe(2)
      expect(delta("cairn_http_requests_total", { route: "/db/rpc", status: "401" })).toBe(1)
      expect(delta("cairn_rpc_outcomes_total", { rpc: "Describe", outcome: "ok" })).toBe(2)
      expect(delta("cairn_http_request_duration_ms", { route: "/db/rpc" })).toBe(3)
    })
  )
})

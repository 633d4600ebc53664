/**
 * Refuses to start a publicly reachable MCP endpoint that is not ready for the public:
 * reachable means a non-loopback bind host or a non-loopback base URL; ready means an
 * external OAuth issuer and explicit query and discovery budgets (the operator's own
 * values, not defaults). The message lists exactly what is missing and how to set it.
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Data, Effect, Layer, Option } from "effect"
import { externalIssuer, issuerSetting } from "./FallbackIssuer.js"
import { isLoopbackHost } from "./Loopback.js"
import { Settings } from "../operations/Settings.js"

export class ExposureRefused extends Data.TaggedError("ExposureRefused")<{ readonly message: string }> {}

/** The external issuer identity trusts instead of the development one. */

/** Budgets a public deployment must set explicitly: the query planner's page and work limits. */
export const queryBudgetSettings = ["CAIRN_QUERY_MAX_PAGE_SIZE", "CAIRN_QUERY_MAX_ROWS_EXAMINED"] as const

/** Discovery budgets (describe): the largest page, and optionally the default page. */
export const discoveryBudgetSettings = ["CAIRN_DISCOVERY_MAX_LIMIT"] as const

/** Whether the bind host or the base URL makes the endpoint reachable from other machines. */
export const isPublic = (settings: { readonly host: string; readonly baseUrl: string }): boolean =>
  !isLoopbackHost(settings.host) || !isLoopbackHost(new URL(settings.baseUrl).hostname)


/** What is wrong with one explicit budget setting, or `undefined` when it is set and valid. */
const budgetProblem = (name: string) =>
  Effect.gen(function* () {
    const raw = yield* Config.option(Config.string(name))
    if (Option.isNone(raw)) return `${name} is not set`
    const parsed = yield* Effect.either(positiveInteger(name))
    return parsed._tag === "Left" ? `${name} must be a positive integer` : undefined
  })

/** Fails with `ExposureRefused` when the endpoint is public but not ready; otherwise succeeds. */
export const exposureGuard = Effect.gen(function* () {
  const settings = yield* Settings
  if (!isPublic(settings)) return
  const missing: Array<string> = []
  if (Option.isNone(yield* externalIssuer)) {
    missing.push(`an external OAuth issuer (set ${issuerSetting} and its keys; the development authorization server is for loopback only)`)
  }
  const groups = [
    ["query", queryBudgetSettings],
    ["discovery", discoveryBudgetSettings]
  ] as const
  for (const [what, names] of groups) {
    const problems: Array<string> = []
    for (const name of names) {
      const problem = yield* budgetProblem(name)
      if (problem) problems.push(problem)
    }
    if (problems.length > 0) missing.push(`explicit ${what} budgets (${problems.join(", ")})`)
  }
  if (missing.length === 0) return
  return yield* new ExposureRefused({
    message:
      `Refusing to start: the MCP endpoint would be reachable publicly (bind host ${settings.host}, base URL ${settings.baseUrl}) ` +
      `without ${missing.join("; and without ")}. Configure these, or bind and advertise a loopback address.`
  })
}).pipe(Effect.withSpan("ExposureGuard.check"))

/** Runs the guard while the application starts. */
export const ExposureGuardLive = Layer.effectDiscard(exposureGuard)

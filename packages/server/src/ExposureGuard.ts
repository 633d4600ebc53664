/**
 * Refuses to start a publicly reachable MCP endpoint that is not ready for the public:
 * reachable means a non-loopback bind host or a non-loopback base URL; ready means an
 * external OAuth issuer and explicit query and discovery budgets. The message lists
 * exactly what is missing and how to set it.
 */
import { Config, Data, Effect, Layer, Option } from "effect"
import { Settings } from "./Settings.js"

export class ExposureRefused extends Data.TaggedError("ExposureRefused")<{ readonly message: string }> {}

/** Names of the settings this guard reads. */
export const exposureSettings = {
  issuer: "CAIRN_ISSUER",
  queryBudgets: "CAIRN_QUERY_BUDGETS",
  discoveryBudgets: "CAIRN_DISCOVERY_BUDGETS"
} as const

const isLoopbackHost = (host: string): boolean => {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "")
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h)
}

/** Whether the bind host or the base URL makes the endpoint reachable from other machines. */
export const isPublic = (settings: { readonly host: string; readonly baseUrl: string }): boolean =>
  !isLoopbackHost(settings.host) || !isLoopbackHost(new URL(settings.baseUrl).hostname)

/**
 * Budgets are `name=value` pairs separated by commas, e.g. `maxLimit=50,defaultLimit=20`;
 * every value a positive integer. Returns the parsed pairs or what is wrong with them.
 */
export const parseBudgets = (text: string): Record<string, number> | string => {
  const out: Record<string, number> = {}
  const parts = text.split(",").map((p) => p.trim()).filter((p) => p !== "")
  if (parts.length === 0) return "it is empty"
  for (const part of parts) {
    const match = /^([A-Za-z][A-Za-z0-9]*)=(\d+)$/.exec(part)
    if (!match || Number(match[2]) <= 0 || !Number.isSafeInteger(Number(match[2]))) {
      return `"${part}" is not name=<positive integer>`
    }
    out[match[1]!] = Number(match[2])
  }
  return out
}

/** Fails with `ExposureRefused` when the endpoint is public but not ready; otherwise succeeds. */
export const exposureGuard = Effect.gen(function* () {
  const settings = yield* Settings
  if (!isPublic(settings)) return
  const issuer = yield* Config.option(Config.string(exposureSettings.issuer))
  const query = yield* Config.option(Config.string(exposureSettings.queryBudgets))
  const discovery = yield* Config.option(Config.string(exposureSettings.discoveryBudgets))
  const missing: Array<string> = []
  if (Option.isNone(issuer) || issuer.value.trim() === "") {
    missing.push(`an external OAuth issuer (set ${exposureSettings.issuer}; the development authorization server is for loopback only)`)
  }
  const budgets = [
    [exposureSettings.queryBudgets, "query", query, "e.g. pageSize=100,rowsExamined=10000"],
    [exposureSettings.discoveryBudgets, "discovery", discovery, "e.g. maxLimit=50"]
  ] as const
  for (const [name, what, value, example] of budgets) {
    if (Option.isNone(value)) {
      missing.push(`explicit ${what} budgets (set ${name}, ${example})`)
      continue
    }
    const parsed = parseBudgets(value.value)
    if (typeof parsed === "string") missing.push(`valid ${what} budgets (${name}: ${parsed}; ${example})`)
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

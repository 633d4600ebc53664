/**
 * Strict decoding of an untrusted `query` request (MCP arguments, raw JSON bodies):
 * unknown keys, a version other than 1, malformed filters and wrong shapes become
 * `invalid_query` whose issues point at the offending place. The filter goes through
 * the one bounded check (`FilterDecoder`) before anything recurses into it, and sizes the
 * planner would refuse anyway (select entries, order terms) are counted on the raw request
 * first, so an oversized request costs no schema work.
 */
import { Effect } from "effect"
import { decodeStrict } from "@cairn/domain/Decode"
import { type InvalidQuery, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { QueryRequest } from "@cairn/domain/Query"
import { checkFilter, malformed } from "./FilterDecoder.js"
import { QueryLimits, type QueryLimitsShape } from "./QueryLimits.js"

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const invalid = malformed("query")
const decodeRequest = decodeStrict(QueryRequest, invalid)

/** The planner's select and order budgets, on the raw document: counting costs nothing next to decoding. */
const sizeProblem = (query: Record<string, unknown>, limits: QueryLimitsShape): QueryBudgetExceeded | undefined => {
  const select = query["select"]
  const selected = isObject(select) ? Object.keys(select).length : 0
  if (selected > limits.maxProjection) {
    return new QueryBudgetExceeded({
      limit: "maxProjection",
      message: `/query/select: ${selected} outputs requested; at most ${limits.maxProjection} are allowed. Select fewer paths.`
    })
  }
  const order = query["order"]
  if (Array.isArray(order) && order.length > limits.maxOrderTerms) {
    return new QueryBudgetExceeded({
      limit: "maxOrderTerms",
      message: `/query/order: ${order.length} order terms; at most ${limits.maxOrderTerms} are allowed. Order by fewer paths.`
    })
  }
  return undefined
}

/**
 * Decodes a raw `query` request; every failure is `invalid_query` (or a filter too large to look at).
 * The checks before the schema are plain calls, not effects of their own: this runs once per read.
 */
export const decodeQueryRequest = (raw: unknown): Effect.Effect<QueryRequest, InvalidQuery | QueryBudgetExceeded, QueryLimits> =>
  Effect.flatMap(QueryLimits, (limits) => {
    if (isObject(raw) && isObject(raw["query"])) {
      const problem =
        sizeProblem(raw["query"], limits) ??
        (raw["query"]["where"] !== undefined ? checkFilter(raw["query"]["where"], "/query/where", limits, invalid) : undefined)
      if (problem !== undefined) return Effect.fail(problem)
    }
    return decodeRequest(raw)
  })

/**
 * Strict decoding of an untrusted `query` request (MCP arguments, raw JSON bodies):
 * unknown keys, a version other than 1, malformed filters and wrong shapes become
 * `invalid_query` whose issues point at the offending place. Filters are decoded node
 * by node, keyed by `op`, because a failed schema union reports every alternative it
 * tried instead of the one the caller meant. Sizes the planner would refuse anyway (filter
 * nodes, `in` lists, select entries, order terms) are checked on the raw request first,
 * so an oversized request costs no schema work.
 */
import { Effect, Schema } from "effect"
import {
  Comparison,
  ComparisonOp,
  decodeStrict,
  InvalidQuery,
  type Issue,
  isSummaryIssue,
  IsNull,
  QueryBudgetExceeded,
  QueryRequest,
  SetMembership,
  summarizeIssues,
  SetOp
} from "@cairn/domain"
import { QueryLimits, type QueryLimitsShape } from "./QueryLimits.js"

const Compound = Schema.Struct({ op: Schema.Literal("and", "or"), filters: Schema.Array(Schema.Unknown) })
const Negation = Schema.Struct({ op: Schema.Literal("not"), filter: Schema.Unknown })

const operators = [...ComparisonOp.literals, ...SetOp.literals, "isNull", "and", "or", "not"]

/**
 * Drops summaries that a more precise issue below them explains, and merges alternatives
 * at one path. Sorted paths and a binary search per path keep it O(n log n): an issue
 * list can be long, and a quadratic pass over it blocked the event loop. A trailing
 * summary issue (`isSummaryIssue`) is kept last, never taken for a place.
 */
const tidy = (all: ReadonlyArray<Issue>): ReadonlyArray<Issue> => {
  const last = all[all.length - 1]
  const summary = last !== undefined && isSummaryIssue(last) ? last : undefined
  const issues = summary === undefined ? all : all.slice(0, -1)
  const paths = [...new Set(issues.map((i) => i.path))].sort()
  const hasDescendant = (path: string): boolean => {
    const prefix = path === "/" ? "/" : `${path}/`
    let lo = 0
    let hi = paths.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (paths[mid]! < prefix) lo = mid + 1
      else hi = mid
    }
    // The root's prefix is itself; the next path decides.
    if (paths[lo] === path) lo++
    return lo < paths.length && paths[lo]!.startsWith(prefix)
  }
  const byPath = new Map<string, Set<string>>()
  for (const i of issues) {
    const messages = byPath.get(i.path)
    if (messages) messages.add(i.message)
    else if (!hasDescendant(i.path)) byPath.set(i.path, new Set([i.message]))
  }
  const tidied = [...byPath].map(([path, messages]) => ({ path, message: [...messages].join(" or ") }))
  return summary === undefined ? tidied : [...tidied, summary]
}

const invalid = (raw: ReadonlyArray<Issue>) => {
  const issues = tidy(raw)
  return new InvalidQuery({ message: `The query request is malformed: ${summarizeIssues(issues, 3)}.`, issues })
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** An operator as the caller wrote it, quoted only when short: a message never echoes a large value. */
const quoted = (u: unknown): string =>
  u === undefined ? "nothing"
  : typeof u === "string" ? (u.length <= 40 ? JSON.stringify(u) : "a long string")
  : typeof u === "object" && u !== null ? (Array.isArray(u) ? "an array" : "an object")
  : String(u)

const checkFilter = (
  raw: unknown,
  at: string,
  budget: { nodes: number; readonly limits: QueryLimitsShape }
): Effect.Effect<void, InvalidQuery | QueryBudgetExceeded> =>
  Effect.gen(function* () {
    const limits = budget.limits
    if (--budget.nodes < 0) {
      return yield* new QueryBudgetExceeded({
        limit: "maxFilterNodes",
        message: `/query/where: the filter has more than ${limits.maxFilterNodes} nodes. Simplify the filter.`
      })
    }
    if (!isObject(raw)) return yield* invalid([{ path: at, message: "a filter is an object with an \"op\"" }])
    const op = raw["op"]
    const schema =
      typeof op !== "string" ? undefined
      : (ComparisonOp.literals as ReadonlyArray<string>).includes(op) ? Comparison
      : (SetOp.literals as ReadonlyArray<string>).includes(op) ? SetMembership
      : op === "isNull" ? IsNull
      : op === "and" || op === "or" ? Compound
      : op === "not" ? Negation
      : undefined
    if (schema === undefined) {
      return yield* invalid([{ path: `${at}/op`, message: `${quoted(op)} is not a filter operator; use one of ${operators.join(", ")}` }])
    }
    const values = raw["value"]
    if (schema === SetMembership && Array.isArray(values) && values.length > limits.maxInValues) {
      // The planner's answer, before decoding every value of the list.
      return yield* new QueryBudgetExceeded({
        limit: "maxInValues",
        message: `/query/where: an in/notIn list has ${values.length} values; at most ${limits.maxInValues} are allowed. Split the query or filter on a broader field.`
      })
    }
    yield* decodeStrict(schema as Schema.Schema<unknown, unknown>, invalid, at)(raw)
    if (op === "and" || op === "or") {
      for (const [i, f] of (raw["filters"] as ReadonlyArray<unknown>).entries()) yield* checkFilter(f, `${at}/filters/${i}`, budget)
    } else if (op === "not") yield* checkFilter(raw["filter"], `${at}/filter`, budget)
  })

const decodeRequest = decodeStrict(QueryRequest, invalid)

/** The planner's select and order budgets, on the raw document: counting costs nothing next to decoding. */
const checkSizes = (query: Record<string, unknown>, limits: QueryLimitsShape): Effect.Effect<void, QueryBudgetExceeded> => {
  const select = query["select"]
  const selected = isObject(select) ? Object.keys(select).length : 0
  if (selected > limits.maxProjection) {
    return Effect.fail(
      new QueryBudgetExceeded({
        limit: "maxProjection",
        message: `/query/select: ${selected} outputs requested; at most ${limits.maxProjection} are allowed. Select fewer paths.`
      })
    )
  }
  const order = query["order"]
  if (Array.isArray(order) && order.length > limits.maxOrderTerms) {
    return Effect.fail(
      new QueryBudgetExceeded({
        limit: "maxOrderTerms",
        message: `/query/order: ${order.length} order terms; at most ${limits.maxOrderTerms} are allowed. Order by fewer paths.`
      })
    )
  }
  return Effect.void
}

/**
 * Decodes a raw `query` request; every failure is `invalid_query`, or
 * `query_budget_exceeded` for a request larger than the planner would take.
 */
export const decodeQueryRequest = (raw: unknown): Effect.Effect<QueryRequest, InvalidQuery | QueryBudgetExceeded> =>
  Effect.gen(function* () {
    if (isObject(raw) && isObject(raw["query"])) {
      const limits = yield* QueryLimits
      yield* checkSizes(raw["query"], limits)
      if (raw["query"]["where"] !== undefined) {
        yield* checkFilter(raw["query"]["where"], "/query/where", { nodes: limits.maxFilterNodes, limits })
      }
    }
    return yield* decodeRequest(raw)
  })

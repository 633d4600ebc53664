/**
 * The one bounded check of the filter language, for every request that carries a
 * filter (a query's `where`, each sync scope entry's `where`) and for the planner, so a
 * filter is judged the same way whichever transport brought it.
 *
 * The walk is iterative and stops at the first node over budget, so no input (a 3,000
 * deep `not`, a 20,000-term `or`, a 60,000-value `in`) can overflow the stack or reach
 * SQL. Depth needs no limit of its own: a filter is never deeper than its node count,
 * so once `maxFilterNodes` holds, every recursive consumer (schema decoding, the
 * planner, SQL compilation, the policy evaluator) recurses at most that deep.
 * Nodes are decoded one by one, keyed by `op`, because a failed schema union reports
 * every alternative it tried instead of the one the caller meant.
 */
import { Effect, type Either, type ParseResult, Schema } from "effect"
import { isSummaryIssue, issuesOf } from "@cairn/domain/Decode"
import { Comparison, ComparisonOp, type Filter, FilterOp, IsNull, SetMembership, SetOp } from "@cairn/domain/QueryDocument"
import { InvalidQuery, type Issue, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { summarizeIssues } from "@cairn/domain/RequestDecoders"
import { QueryLimits, type QueryLimitsShape } from "./QueryLimits.js"

const Compound = Schema.Struct({ op: Schema.Literal("and", "or"), filters: Schema.Array(Schema.Unknown) })
const Negation = Schema.Struct({ op: Schema.Literal("not"), filter: Schema.Unknown })

const strict = { onExcessProperty: "error", errors: "all" } as const

type NodeDecoder = (node: unknown) => Either.Either<unknown, ParseResult.ParseError>

/**
 * One node's strict decoder by its `op`, each built once: exactly the members of `Filter`, children
 * left to the walk.
 */
const nodeDecoders = (() => {
  const strictly = (schema: Schema.Schema<any, any>): NodeDecoder => Schema.decodeUnknownEither(schema, strict)
  const comparison = strictly(Comparison)
  const set = strictly(SetMembership)
  const decoders = new Map<string, NodeDecoder>([
    ...ComparisonOp.literals.map((op) => [op, comparison] as const),
    ...SetOp.literals.map((op) => [op, set] as const),
    ["isNull", strictly(IsNull)],
    ["and", strictly(Compound)],
    ["or", strictly(Compound)],
    ["not", strictly(Negation)]
  ])
  return decoders
})()

const decoderOf = (op: unknown): NodeDecoder | undefined => (typeof op === "string" ? nodeDecoders.get(op) : undefined)

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

/** An operator as the caller wrote it, quoted only when short: a message never echoes a large value. */
const quoted = (u: unknown): string =>
  u === undefined ? "nothing"
  : typeof u === "string" ? (u.length <= 40 ? JSON.stringify(u) : "a long string")
  : typeof u === "object" && u !== null ? (Array.isArray(u) ? "an array" : "an object")
  : String(u)

/** `invalid_query` for a malformed request of kind `what` ("query", "sync"), naming its issues. */
export const malformed = (what: string) => (raw: ReadonlyArray<Issue>): InvalidQuery => {
  const issues = tidy(raw)
  return new InvalidQuery({ message: `The ${what} request is malformed: ${summarizeIssues(issues, 3)}.`, issues })
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The limits a filter is held to. */
export type FilterLimits = Pick<QueryLimitsShape, "maxFilterNodes" | "maxInValues">

/**
 * Checks a filter at `at` (a JSON pointer) without recursion: its size against the
 * budgets, then each node's shape. Answers the first problem, or `undefined`.
 */
export const checkFilter = (
  raw: unknown,
  at: string,
  limits: FilterLimits,
  onIssues: (issues: ReadonlyArray<Issue>) => InvalidQuery
): InvalidQuery | QueryBudgetExceeded | undefined => {
  const stack: Array<readonly [unknown, string]> = [[raw, at]]
  let nodes = 0
  while (stack.length > 0) {
    const [node, path] = stack.pop()!
    if (++nodes > limits.maxFilterNodes) {
      return new QueryBudgetExceeded({
        limit: "maxFilterNodes",
        message: `${at}: the filter has more than ${limits.maxFilterNodes} nodes (every comparison and every and/or/not counts). Simplify the filter.`
      })
    }
    if (!isObject(node)) return onIssues([{ path, message: "a filter is an object with an \"op\"" }])
    const op = node["op"]
    const decode = decoderOf(op)
    if (decode === undefined) {
      return onIssues([
        { path: `${path}/op`, message: `${quoted(op)} is not a filter operator; use one of ${FilterOp.literals.join(", ")}` }
      ])
    }
    // Counted before the list is decoded, so a huge list costs nothing.
    const values = node["value"]
    if ((op === "in" || op === "notIn") && Array.isArray(values) && values.length > limits.maxInValues) {
      return new QueryBudgetExceeded({
        limit: "maxInValues",
        message: `${path}: an in/notIn list has ${values.length} values; at most ${limits.maxInValues} are allowed. Split the request or filter on a broader field.`
      })
    }
    let decoded: Either.Either<unknown, ParseResult.ParseError>
    try {
      decoded = decode(node)
    } catch {
      // Effect's union decoding reads values with `String(v)`, which throws for {"toString": 0}.
      return onIssues([{ path, message: "holds an object where a plain value (a string, number or boolean) belongs" }])
    }
    if (decoded._tag === "Left") return onIssues(issuesOf(decoded.left, path))
    if (op === "and" || op === "or") {
      const children = node["filters"] as ReadonlyArray<unknown>
      // Pushed in reverse so nodes are checked in document order.
      for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], `${path}/filters/${i}`])
    } else if (op === "not") stack.push([node["filter"], `${path}/filter`])
  }
  return undefined
}

/**
 * Decodes one filter at `at` within the budgets of `QueryLimits`. `checkFilter` has then
 * decoded every node strictly with its own member of `Filter` (the members as `Filter`
 * declares them, each node's children checked as nodes of their own), which is what decoding
 * `Filter` itself does; `Filter` transforms nothing, so the checked filter is the answer.
 */
export const decodeFilter = (
  raw: unknown,
  at: string,
  onIssues: (issues: ReadonlyArray<Issue>) => InvalidQuery = malformed("query")
): Effect.Effect<Filter, InvalidQuery | QueryBudgetExceeded, QueryLimits> =>
  Effect.flatMap(QueryLimits, (limits) => {
    const problem = checkFilter(raw, at, limits, onIssues)
    return problem === undefined ? Effect.succeed(raw as Filter) : Effect.fail(problem)
  })

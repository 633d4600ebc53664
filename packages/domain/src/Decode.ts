/**
 * Decodes untrusted request values into domain types, turning schema failures into
 * the public error the caller should see, with the offending paths. The report is
 * bounded whatever the input: at most `maxIssues` places, each message and path capped,
 * and a large input is checked only up to its first problem.
 */
import { Effect, Either, ParseResult, Schema, SchemaAST } from "effect"
import type { Issue } from "./PublicError.js"
import * as Redaction from "./Redaction.js"

/** Most failing places listed in one error; the rest are counted in one summary issue. */
export const maxIssues = 20

// A message or path longer than this is cut: enough to find the place, never an echo of a large input.
const maxMessageLength = 200
const maxPathLength = 200

// Inputs with more values than this are reported by their first problem only: collecting
// every problem costs a full decode per value (a 520,000-element array took seconds),
// while a caller fixes a large request one problem at a time anyway.
const fullReportMaxValues = 1_000

const omissionPattern = /^and (\d+) more problems? not listed$/
const uncheckedMessage = "other problems may follow: a request this large is reported by its first problem only"

/** The summary issue standing for `count` failing places beyond those listed. */
export const omittedIssues = (count: number, path = "/"): Issue => ({
  path,
  message: `and ${count} more ${count === 1 ? "problem" : "problems"} not listed`
})

/** How many places a summary issue (see `omittedIssues`) stands for; `undefined` for any other issue. */
export const omittedCount = (issue: Issue): number | undefined => {
  const match = omissionPattern.exec(issue.message)
  return match === null ? undefined : Number(match[1])
}

/** The summary issue saying that only the first problem of a large input was looked for. */
export const uncheckedIssues = (path = "/"): Issue => ({ path, message: uncheckedMessage })

/** Whether `issue` summarizes (see `omittedIssues`, `uncheckedIssues`) rather than pointing at a place; it comes last. */
export const isSummaryIssue = (issue: Issue): boolean => issue.message === uncheckedMessage || omittedCount(issue) !== undefined

const cut = (s: string, max: number) => (s.length <= max ? s : `${s.slice(0, max - 1)}…`)

/** Whether ArrayFormatter reports this node as one message instead of descending (a message annotation). */
const hasOwnMessage = (issue: ParseResult.ParseIssue): boolean =>
  (issue._tag === "Composite" || issue._tag === "Refinement" || issue._tag === "Transformation") &&
  SchemaAST.getMessageAnnotation(issue.ast)._tag === "Some"

interface Budget {
  left: number
  omitted: number
}

/** Counts the places under `issue` as ArrayFormatter would list them, without formatting any. */
const count = (issue: ParseResult.ParseIssue): number => {
  let n = 0
  const stack: Array<ParseResult.ParseIssue> = [issue]
  while (stack.length > 0) {
    const i = stack.pop()!
    if (hasOwnMessage(i)) n++
    else if (i._tag === "Composite") {
      // A loop, not a spread: a composite can hold hundreds of thousands of issues.
      if (Array.isArray(i.issues)) for (const child of i.issues as ReadonlyArray<ParseResult.ParseIssue>) stack.push(child)
      else stack.push(i.issues as ParseResult.ParseIssue)
    } else if (i._tag === "Pointer" || i._tag === "Refinement" || i._tag === "Transformation") stack.push(i.issue)
    else n++
  }
  return n
}

/**
 * A copy of `issue` keeping only its first `budget.left` places (in ArrayFormatter's
 * order) and counting the others in `budget.omitted`; large actual values are replaced
 * by a short description. `undefined` when nothing is left to show.
 */
const prune = (issue: ParseResult.ParseIssue, budget: Budget): ParseResult.ParseIssue | undefined => {
  if (budget.left <= 0) {
    budget.omitted += count(issue)
    return undefined
  }
  if (hasOwnMessage(issue)) {
    budget.left--
    return issue
  }
  switch (issue._tag) {
    case "Type":
      budget.left--
      // The one redaction rule: the value the caller sent is described, never echoed (error bodies, logs quoting them).
      return new ParseResult.Type(issue.ast, Redaction.standIn(issue.actual), issue.message)
    case "Forbidden":
    case "Unexpected":
    case "Missing":
      budget.left--
      return issue
    case "Pointer": {
      const inner = prune(issue.issue, budget)
      return inner && new ParseResult.Pointer(issue.path, issue.actual, inner)
    }
    case "Refinement": {
      const inner = prune(issue.issue, budget)
      return inner && new ParseResult.Refinement(issue.ast, issue.actual, issue.kind, inner)
    }
    case "Transformation": {
      const inner = prune(issue.issue, budget)
      return inner && new ParseResult.Transformation(issue.ast, issue.actual, issue.kind, inner)
    }
    case "Composite": {
      const children = Array.isArray(issue.issues) ? (issue.issues as ReadonlyArray<ParseResult.ParseIssue>) : [issue.issues as ParseResult.ParseIssue]
      const kept: Array<ParseResult.ParseIssue> = []
      for (const child of children) {
        const inner = prune(child, budget)
        if (inner) kept.push(inner)
      }
      if (kept.length === 0) return undefined
      return new ParseResult.Composite(issue.ast, issue.actual, kept.length === 1 ? kept[0]! : (kept as [ParseResult.ParseIssue, ...Array<ParseResult.ParseIssue>]), issue.output)
    }
  }
}

/**
 * The failing places of `error` as issues, paths under `prefix`: the first `maxIssues`
 * as ArrayFormatter lists them, then one summary issue (`omittedIssues`) when there are
 * more. Linear in the size of the error; the output is bounded whatever its size.
 */
export const issuesOf = (error: ParseResult.ParseError, prefix = ""): ReadonlyArray<Issue> => {
  const budget: Budget = { left: maxIssues, omitted: 0 }
  const pruned = prune(error.issue, budget)
  const shown =
    pruned === undefined ? [] : ParseResult.ArrayFormatter.formatIssueSync(pruned).map((i) => ({
      path: cut(prefix + (i.path.length === 0 ? "" : "/" + i.path.map(String).join("/")) || "/", maxPathLength),
      message: cut(i.message, maxMessageLength)
    }))
  return budget.omitted > 0 ? [...shown, omittedIssues(budget.omitted, prefix || "/")] : shown
}

/** Whether `input` holds at most `limit` values (scalars and containers), found by a walk that stops there. */
const hasAtMostValues = (input: unknown, limit: number): boolean => {
  let left = limit
  const stack: Array<unknown> = [input]
  while (stack.length > 0) {
    const v = stack.pop()
    if (--left < 0) return false
    if (typeof v === "object" && v !== null) {
      const values = Array.isArray(v) ? v : Object.values(v)
      if (values.length > left) return false
      for (const value of values) stack.push(value)
    }
  }
  return true
}

/**
 * Decodes `input` with `schema`, rejecting unknown keys; on failure builds the error
 * with `onIssues` from the failing paths: at most `maxIssues`, then a summary issue.
 * A decode stops at the first problem; only a small input is decoded again for all of
 * them, so a failing request costs at most one full decode of `fullReportMaxValues` values.
 */
export const decodeStrict = <A, I, E>(
  schema: Schema.Schema<A, I, never>,
  onIssues: (issues: ReadonlyArray<Issue>) => E,
  prefix = ""
) => {
  const strictFirst = { onExcessProperty: "error", errors: "first" } as const
  const decodeFirst = Schema.decodeUnknown(schema, strictFirst)
  // The usual case, synchronously: a valid input costs no effect of its own (anything else,
  // including a schema that is not synchronous, takes the path below, which answers as before).
  const quick = Schema.decodeUnknownEither(schema, strictFirst)
  const decodeAll = Schema.decodeUnknown(schema, { onExcessProperty: "error", errors: "all" })
  return (input: unknown): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      let decoded: Either.Either<A, ParseResult.ParseError> | undefined
      try {
        decoded = quick(input)
      } catch {
        decoded = undefined
      }
      return decoded !== undefined && Either.isRight(decoded) ? Effect.succeed(decoded.right) : strictly(input)
    })
  function strictly(input: unknown): Effect.Effect<A, E> {
    return Effect.suspend(() => decodeFirst(input)).pipe(
      Effect.catchAll((first) =>
        hasAtMostValues(input, fullReportMaxValues)
          ? Effect.suspend(() => decodeAll(input)).pipe(Effect.mapError((all) => onIssues(issuesOf(all, prefix))))
          : Effect.fail(onIssues([...issuesOf(first, prefix), uncheckedIssues(prefix || "/")]))
      ),
      // Effect's union decoding reads a discriminator with `String(value)`, which throws for an
      // object like {"toString": 0}; such a value is the caller's mistake, not a server failure.
      Effect.catchAllDefect(() =>
        Effect.fail(onIssues([{ path: prefix || "/", message: "holds an object where a plain value (a string, number or boolean) belongs" }]))
      )
    )
  }
}

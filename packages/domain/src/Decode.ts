/**
 * Decodes untrusted request values into domain types, turning schema failures into
 * the public error the caller should see, with the offending paths.
 */
import { Effect, ParseResult, Schema } from "effect"
import type { Issue } from "./PublicError.js"

export const issuesOf = (error: ParseResult.ParseError, prefix = ""): ReadonlyArray<Issue> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((i) => ({
    path: prefix + (i.path.length === 0 ? "" : "/" + i.path.map(String).join("/")) || "/",
    message: i.message
  }))

/**
 * Decodes `input` with `schema`, rejecting unknown keys; on failure builds the error
 * with `onIssues` from the failing paths.
 */
export const decodeStrict =
  <A, I, E>(schema: Schema.Schema<A, I, never>, onIssues: (issues: ReadonlyArray<Issue>) => E, prefix = "") =>
  (input: unknown): Effect.Effect<A, E> =>
    Schema.decodeUnknown(schema, { onExcessProperty: "error", errors: "all" })(input).pipe(
      Effect.mapError((error) => onIssues(issuesOf(error, prefix)))
    )

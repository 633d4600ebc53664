/**
 * Whether a JSON value can be stored in (and compared with) a column of a given type,
 * and whether a leaf of the filter language applies to a field: the one rule the
 * planner (query filters) and sync (scope filters) both judge leaves by.
 */
import type { Issue } from "@cairn/domain/PublicError"
import type { Comparison, IsNull, SetMembership } from "@cairn/domain/QueryDocument"
import { standIn } from "@cairn/domain/Redaction"
import type { ColumnType } from "./internal/storedType.js"

/** A concrete scalar of the column's stored type (not checked against a literal set). */
export const fitsColumn = (column: ColumnType, value: unknown): boolean => {
  switch (column) {
    case "text":
      return typeof value === "string"
    case "integer":
      return typeof value === "number" && Number.isSafeInteger(value)
    case "real":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
  }
}

/** What a leaf needs to know of the field it names (a catalog field or the record id). */
export interface Comparable {
  readonly column: ColumnType
  readonly literals?: ReadonlyArray<string | number | boolean> | undefined
  readonly operators: ReadonlyArray<string>
}

/** One thing wrong with a leaf: its operator, or one of its values (`index` within an in/notIn list). */
export type LeafProblem =
  | { readonly _tag: "Operator" }
  | { readonly _tag: "Value"; readonly index: number | undefined; readonly value: unknown }

/**
 * Everything wrong with applying `leaf` to `field`, in document order: an operator the
 * field does not take (then nothing else), else every value that is null (use `isNull`),
 * not a string for `startsWith`/`contains`, or not a value the field can hold.
 */
export const leafProblems = (field: Comparable, leaf: Comparison | SetMembership | IsNull): ReadonlyArray<LeafProblem> => {
  if (!field.operators.includes(leaf.op)) return [{ _tag: "Operator" }]
  if (leaf.op === "isNull") return []
  const list = leaf.op === "in" || leaf.op === "notIn"
  const values: ReadonlyArray<unknown> = list ? (leaf.value as ReadonlyArray<unknown>) : [leaf.value]
  const problems: Array<LeafProblem> = []
  for (const [i, value] of values.entries()) {
    const fits =
      value !== null &&
      (leaf.op === "startsWith" || leaf.op === "contains"
        ? typeof value === "string"
        : field.literals
          ? field.literals.includes(value as string | number | boolean)
          : fitsColumn(field.column, value))
    if (!fits) problems.push({ _tag: "Value", index: list ? i : undefined, value })
  }
  return problems
}

/** What a field takes, in words: its literal set, or its stored type. */
const takes = (field: Comparable): string =>
  field.literals
    ? `one of ${field.literals.map((l) => JSON.stringify(l)).join(", ")}`
    : { text: "a string", integer: "an integer", real: "a number", boolean: "true or false" }[field.column]

/**
 * The public wording of one `leafProblems` problem of the leaf at `at` (a JSON pointer into
 * the request): the issue's path and message, the same for a query's `where` and a sync
 * scope's filter. The field is named by the leaf's own path, as the caller wrote it; a
 * value is described, never echoed (a 64 Ki string would come back twice, 1e400 reads "null").
 */
export const leafIssue = (field: Comparable, leaf: Comparison | SetMembership | IsNull, problem: LeafProblem, at: string): Issue => {
  const path = JSON.stringify(leaf.path)
  if (problem._tag === "Operator") {
    return { path: `${at}/op`, message: `"${leaf.op}" cannot be applied to ${path}; its operators are ${field.operators.join(", ")}.` }
  }
  const valueAt = problem.index === undefined ? `${at}/value` : `${at}/value/${problem.index}`
  if (problem.value === null) return { path: valueAt, message: `null is not a value to compare with; use {"op": "isNull", "path": ${path}} instead.` }
  if (leaf.op === "startsWith" || leaf.op === "contains") return { path: valueAt, message: `"${leaf.op}" takes a string.` }
  return { path: valueAt, message: `${standIn(problem.value)} is not a valid value for ${path}, which takes ${takes(field)}.` }
}

/**
 * The policy rule language: the query filter language (`Filter` of `@cairn/domain`, so
 * any query filter is a rule) plus principal references (subject, roles, scopes,
 * claims), conditions on the principal alone, and relationship existence.
 */
import type { ComparisonOp, Path, Scalar, SetOp } from "@cairn/domain/QueryDocument"

/** A single value taken from the verified principal when a view is built. */
export type PrincipalValue =
  | { readonly _tag: "PrincipalValue"; readonly ref: "subject" }
  | { readonly _tag: "PrincipalValue"; readonly ref: "claim"; readonly name: string }

/** A list of values taken from the principal, for `in` / `notIn`. */
export type PrincipalList =
  | { readonly _tag: "PrincipalList"; readonly ref: "roles" | "scopes" }
  | { readonly _tag: "PrincipalList"; readonly ref: "claim"; readonly name: string }

export type Value = Scalar | PrincipalValue

export type Rule =
  | { readonly op: ComparisonOp; readonly path: Path; readonly value: Value }
  | { readonly op: SetOp; readonly path: Path; readonly value: ReadonlyArray<Value> | PrincipalList }
  | { readonly op: "isNull"; readonly path: Path }
  | { readonly op: "and"; readonly filters: ReadonlyArray<Rule> }
  | { readonly op: "or"; readonly filters: ReadonlyArray<Rule> }
  | { readonly op: "not"; readonly filter: Rule }
  /** Some row of `entity` has `field` equal to the value at `path` of this row and satisfies `where`. */
  | { readonly op: "exists"; readonly entity: string; readonly field: string; readonly path: Path; readonly where?: Rule }
  /** Conditions on the principal alone: they hold or not for every row alike. */
  | { readonly op: "hasRole"; readonly role: string }
  | { readonly op: "hasScope"; readonly scope: string }
  | { readonly op: "hasClaim"; readonly name: string; readonly value: string | number | boolean }
  | { readonly op: "always" }
  | { readonly op: "never" }

/** A rule over the principal alone (no row paths): used for visibility. */
export type Condition = Rule

/** A field path as an array, or dotted (`"task.projectId"`). */
export type PathLike = string | Path

const toPath = (path: PathLike): Path => (typeof path === "string" ? path.split(".") : path)

/** References to the verified principal, substituted with concrete values per request. */
export const principal = {
  subject: { _tag: "PrincipalValue", ref: "subject" } as PrincipalValue,
  roles: { _tag: "PrincipalList", ref: "roles" } as PrincipalList,
  scopes: { _tag: "PrincipalList", ref: "scopes" } as PrincipalList,
  /**
   * A scalar claim of the token. A comparison with a claim the token lacks (or holds
   * with a type the field cannot store) never grants: false, or true under `not`.
   */
  claim: (name: string): PrincipalValue => ({ _tag: "PrincipalValue", ref: "claim", name }),
  /** A claim holding a list of scalars (a scalar claim counts as a one-element list). */
  claimList: (name: string): PrincipalList => ({ _tag: "PrincipalList", ref: "claim", name })
} as const

const compare = (op: ComparisonOp) => (path: PathLike, value: Value): Rule => ({ op, path: toPath(path), value })

export const eq = compare("eq")
export const ne = compare("ne")
export const lt = compare("lt")
export const lte = compare("lte")
export const gt = compare("gt")
export const gte = compare("gte")
export const startsWith = compare("startsWith")
export const contains = compare("contains")

export const isIn = (path: PathLike, values: ReadonlyArray<Value> | PrincipalList): Rule => ({
  op: "in",
  path: toPath(path),
  value: values
})
export const notIn = (path: PathLike, values: ReadonlyArray<Value> | PrincipalList): Rule => ({
  op: "notIn",
  path: toPath(path),
  value: values
})
export const isNull = (path: PathLike): Rule => ({ op: "isNull", path: toPath(path) })

export const and = (...filters: ReadonlyArray<Rule>): Rule => ({ op: "and", filters })
export const or = (...filters: ReadonlyArray<Rule>): Rule => ({ op: "or", filters })
export const not = (filter: Rule): Rule => ({ op: "not", filter })

/**
 * Relationship existence: some `entity` row whose `field` equals the value at `path` of
 * the row being decided, and which satisfies `where` (a rule over `entity`).
 */
export const exists = (entity: string, field: string, path: PathLike, where?: Rule): Rule =>
  where === undefined
    ? { op: "exists", entity, field, path: toPath(path) }
    : { op: "exists", entity, field, path: toPath(path), where }

export const hasRole = (role: string): Rule => ({ op: "hasRole", role })
export const hasScope = (scope: string): Rule => ({ op: "hasScope", scope })
export const hasClaim = (name: string, value: string | number | boolean): Rule => ({ op: "hasClaim", name, value })
export const always: Rule = { op: "always" }
export const never: Rule = { op: "never" }

/**
 * Substitutes one principal into a checked rule: principal references become concrete
 * values, principal conditions become constants, and constants fold away, leaving
 * `true`, `false` or a `ScopeFilter` the planner, writer and sync can evaluate.
 */
import { RowScope } from "@cairn/catalog"
import { type Catalog } from "@cairn/catalog/Catalog"
import type { Principal } from "@cairn/domain/Principal"
import type { Scalar } from "@cairn/domain/QueryDocument"
import type { PrincipalList, PrincipalValue, Rule } from "../Rule.js"
import { fitsField, isPrincipalList, isPrincipalValue } from "./check.js"
import { type FieldType, resolvePath } from "./paths.js"

type ScopeFilter = RowScope.ScopeFilter

/** A claim the token lacks, or holds with a type the compared field cannot store. */
const Missing: unique symbol = Symbol("Missing")

export type Resolved = boolean | ScopeFilter

const scalarClaim = (principal: Principal, name: string): Scalar | typeof Missing => {
  const v = principal.claims[name]
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? v : Missing
}

const principalValue = (principal: Principal, value: PrincipalValue, field: FieldType): Scalar | typeof Missing => {
  const v = value.ref === "subject" ? principal.subject : scalarClaim(principal, value.name)
  return v !== Missing && fitsField(field, v) ? v : Missing
}

const principalList = (principal: Principal, list: PrincipalList, field: FieldType): ReadonlyArray<Scalar> | typeof Missing => {
  let values: ReadonlyArray<unknown>
  if (list.ref === "claim") {
    const v = principal.claims[list.name]
    if (v === undefined) return Missing
    values = Array.isArray(v) ? v : [v]
  } else values = list.ref === "roles" ? principal.roles : principal.scopes
  return values.every((v) => fitsField(field, v)) ? (values as ReadonlyArray<Scalar>) : Missing
}

const hasClaim = (principal: Principal, name: string, value: unknown): boolean => {
  const v = principal.claims[name]
  return Array.isArray(v) ? v.includes(value) : v === value
}

/**
 * Resolves `rule` for `principal` over rows of `entity` (undefined: principal-only).
 * A comparison with a missing claim can never grant: it folds to `false` where it
 * appears positively and to `true` under an odd number of `not`s (`positive` tracks
 * which), so the rule grants the least it could, whatever the claim's value would be.
 */
export const resolve = (
  catalog: Catalog,
  principal: Principal,
  entity: string | undefined,
  rule: Rule,
  positive = true
): Resolved => {
  const unknown = !positive
  const fieldAt = (path: ReadonlyArray<string>): FieldType => {
    // Checked at compile time, so the path resolves.
    const resolved = resolvePath(catalog, entity!, path)
    return (resolved as Exclude<typeof resolved, string>).field
  }
  switch (rule.op) {
    case "always":
      return true
    case "never":
      return false
    case "hasRole":
      return principal.roles.includes(rule.role)
    case "hasScope":
      return principal.scopes.includes(rule.scope)
    case "hasClaim":
      return hasClaim(principal, rule.name, rule.value)
    case "and":
    case "or": {
      const absorbing = rule.op === "or"
      const kept: Array<ScopeFilter> = []
      for (const f of rule.filters) {
        const r = resolve(catalog, principal, entity, f, positive)
        if (r === absorbing) return absorbing
        if (r !== !absorbing) kept.push(r as ScopeFilter)
      }
      if (kept.length === 0) return !absorbing
      return kept.length === 1 ? kept[0]! : { op: rule.op, filters: kept }
    }
    case "not": {
      const r = resolve(catalog, principal, entity, rule.filter, !positive)
      return typeof r === "boolean" ? !r : { op: "not", filter: r }
    }
    case "isNull":
      return { op: "isNull", path: rule.path }
    case "exists": {
      if (rule.where === undefined) return { op: "exists", entity: rule.entity, field: rule.field, path: rule.path }
      const where = resolve(catalog, principal, rule.entity, rule.where, positive)
      if (where === false) return false
      return where === true
        ? { op: "exists", entity: rule.entity, field: rule.field, path: rule.path }
        : { op: "exists", entity: rule.entity, field: rule.field, path: rule.path, where }
    }
    case "in":
    case "notIn": {
      const field = fieldAt(rule.path)
      let values: ReadonlyArray<Scalar> | typeof Missing
      if (isPrincipalList(rule.value)) values = principalList(principal, rule.value, field)
      else {
        const out: Array<Scalar> = []
        for (const v of rule.value as ReadonlyArray<Scalar | PrincipalValue>) {
          const s = isPrincipalValue(v) ? principalValue(principal, v, field) : v
          if (s === Missing) return unknown
          out.push(s)
        }
        values = out
      }
      return values === Missing ? unknown : { op: rule.op, path: rule.path, value: values }
    }
    default: {
      if (!isPrincipalValue(rule.value)) return { op: rule.op, path: rule.path, value: rule.value }
      const v = principalValue(principal, rule.value, fieldAt(rule.path))
      return v === Missing ? unknown : { op: rule.op, path: rule.path, value: v }
    }
  }
}

/** The row scope a resolved rule grants. */
export const toRowScope = (r: Resolved): RowScope.RowScope =>
  r === true ? RowScope.all : r === false ? RowScope.none : RowScope.where(r)

/** Conjunction of two resolved rules, folding constants. */
export const both = (a: Resolved, b: Resolved): Resolved => {
  if (a === false || b === false) return false
  if (a === true) return b
  if (b === true) return a
  return { op: "and", filters: [a, b] }
}

/**
 * Compile-time checks of rules against the catalog: every path, operator and value must
 * fit the field it names, so a policy that mistypes anything never installs.
 */
import { type Catalog } from "@cairn/catalog/Catalog"
import { fitsColumn } from "@cairn/catalog/ColumnValue"
import type { PrincipalList, Rule, Value } from "../Rule.js"
import { type FieldType, fieldType, resolvePath } from "./paths.js"

export const isPrincipalValue = (v: unknown): v is Extract<Value, { _tag: "PrincipalValue" }> =>
  typeof v === "object" && v !== null && (v as { _tag?: unknown })._tag === "PrincipalValue"

export const isPrincipalList = (v: unknown): v is PrincipalList =>
  typeof v === "object" && v !== null && (v as { _tag?: unknown })._tag === "PrincipalList"

const show = (v: unknown): string => JSON.stringify(v) ?? String(v)

const fieldName = (f: FieldType) => `${f.entity}.${f.name}`

/** Whether a concrete scalar fits a field's stored type (not its literal set). */
export const fitsField = (field: FieldType, value: unknown): boolean => fitsColumn(field.column, value)

const valueProblem = (field: FieldType, value: unknown): string | undefined => {
  if (isPrincipalValue(value)) {
    if (value.ref === "claim") return typeof value.name === "string" && value.name !== "" ? undefined : "a claim reference needs a name"
    return field.column === "text" && !field.literals
      ? undefined
      : `${fieldName(field)} (${field.literals ? "one of " + field.literals.map(show).join(", ") : field.column}) cannot be compared with the principal's subject (a free string)`
  }
  if (value === null) return `${fieldName(field)} is compared with null; use isNull instead`
  if (!fitsField(field, value)) return `${show(value)} is not a valid ${field.column} value for ${fieldName(field)}`
  if (field.literals && !field.literals.includes(value as string | number | boolean)) {
    return `${show(value)} is not one of the values of ${fieldName(field)} (${field.literals.map(show).join(", ")})`
  }
  return undefined
}

/**
 * Checks `rule` over rows of `entity`; with `entity` undefined the rule must be a
 * condition on the principal alone. Problems are pushed as `<where> at <location>: <what>`.
 */
export const checkRule = (
  catalog: Catalog,
  entity: string | undefined,
  rule: Rule,
  where: string,
  problems: Array<string>,
  location = ""
): void => {
  const report = (what: string) => problems.push(`${where}${location === "" ? "" : ` at ${location}`}: ${what}`)
  const at = (suffix: string) => (location === "" ? suffix : `${location}.${suffix}`)
  if (typeof rule !== "object" || rule === null || typeof (rule as { op?: unknown }).op !== "string") {
    return void report(`${show(rule)} is not a rule`)
  }
  const pathRule = (path: ReadonlyArray<string>): FieldType | undefined => {
    if (entity === undefined) {
      report(`a visibility condition depends on the principal only, but "${rule.op}" reads the row (path "${path.join(".")}")`)
      return undefined
    }
    if (!Array.isArray(path)) return void report(`the path must be an array of names`)
    const resolved = resolvePath(catalog, entity, path)
    if (typeof resolved === "string") return void report(resolved)
    if (!resolved.field.operators.includes(rule.op)) {
      report(`operator "${rule.op}" does not apply to ${fieldName(resolved.field)} (it takes ${resolved.field.operators.join(", ")})`)
      return undefined
    }
    return resolved.field
  }
  switch (rule.op) {
    case "always":
    case "never":
      return
    case "hasRole":
      if (typeof rule.role !== "string" || rule.role === "") report("hasRole needs a role name")
      return
    case "hasScope":
      if (typeof rule.scope !== "string" || rule.scope === "") report("hasScope needs a scope name")
      return
    case "hasClaim":
      if (typeof rule.name !== "string" || rule.name === "") report("hasClaim needs a claim name")
      if (!["string", "number", "boolean"].includes(typeof rule.value)) report("hasClaim compares with a string, number or boolean")
      return
    case "and":
    case "or":
      if (!Array.isArray(rule.filters)) return void report(`"${rule.op}" needs a list of filters`)
      rule.filters.forEach((f, i) => checkRule(catalog, entity, f, where, problems, at(`${rule.op}[${i}]`)))
      return
    case "not":
      return checkRule(catalog, entity, rule.filter, where, problems, at("not"))
    case "isNull": {
      const field = pathRule(rule.path)
      if (field && !field.nullable) report(`${fieldName(field)} is never null`)
      return
    }
    case "exists": {
      if (entity === undefined) {
        return void report(`a visibility condition depends on the principal only, but "exists" reads the row`)
      }
      const inner = catalog.entity(rule.entity)
      if (!inner) return void report(`exists: entity "${rule.entity}" is not defined`)
      const innerField = fieldType(catalog, rule.entity, rule.field)
      if (!innerField) return void report(`exists: ${rule.entity} has no field "${rule.field}"`)
      const outer = Array.isArray(rule.path) ? resolvePath(catalog, entity, rule.path) : "the path must be an array of names"
      if (typeof outer === "string") return void report(`exists: ${outer}`)
      if (outer.field.column !== innerField.column) {
        report(`exists: ${fieldName(innerField)} (${innerField.column}) cannot equal ${fieldName(outer.field)} (${outer.field.column})`)
      }
      if (rule.where !== undefined) checkRule(catalog, rule.entity, rule.where, where, problems, at(`exists(${rule.entity})`))
      return
    }
    case "eq":
    case "ne":
    case "lt":
    case "lte":
    case "gt":
    case "gte":
    case "startsWith":
    case "contains": {
      const field = pathRule(rule.path)
      const problem = field && valueProblem(field, rule.value)
      if (problem) report(problem)
      return
    }
    case "in":
    case "notIn": {
      const field = pathRule(rule.path)
      if (!field) return
      const value = rule.value
      if (isPrincipalList(value)) {
        if (value.ref !== "claim" && field.column !== "text") {
          report(`${fieldName(field)} (${field.column}) cannot be compared with the principal's ${value.ref} (strings)`)
        }
        return
      }
      if (!Array.isArray(value)) return void report(`"${rule.op}" takes a list of values`)
      for (const v of value) {
        const problem = valueProblem(field, v)
        if (problem) report(problem)
      }
      return
    }
    default: {
      const op = (rule as { op: string }).op
      report(`unknown rule operator "${op}"`)
    }
  }
}

/**
 * A principal's row scope as a template over its subject: the same scope with every value
 * equal to the subject replaced by a parameter. Principals whose templates are equal read
 * rows by the same rule up to their subject, so one evaluation of the template
 * (`Evaluate.inScopeBySubject`) decides a record for all of them at once: sync decides a
 * commit per distinct template, not per subscriber.
 *
 * Made from the compiled scope itself, so it is exact whatever the policy says: substituting
 * the subject back for the parameter gives the scope it was made from.
 */
import { RowScope } from "@cairn/catalog"
import type { Scalar } from "@cairn/domain/QueryDocument"

/** What stands for the subject in a template: text no subject is (see `template`). */
export const parameter = "\u0000cairn:subject\u0000"

const mentions = (filter: RowScope.ScopeFilter, text: string): boolean => {
  switch (filter.op) {
    case "and":
    case "or":
      return filter.filters.some((f) => mentions(f, text))
    case "not":
      return mentions(filter.filter, text)
    case "exists":
      return filter.where !== undefined && mentions(filter.where, text)
    case "isNull":
      return false
    case "in":
    case "notIn":
      return filter.value.some((v) => v === text)
    default:
      return filter.value === text
  }
}

/** `filter` with every value `from` replaced by `to`. */
const replace = (filter: RowScope.ScopeFilter, from: string, to: string): RowScope.ScopeFilter => {
  const value = (v: Scalar): Scalar => (v === from ? to : v)
  switch (filter.op) {
    case "and":
    case "or":
      return { op: filter.op, filters: filter.filters.map((f) => replace(f, from, to)) }
    case "not":
      return { op: "not", filter: replace(filter.filter, from, to) }
    case "exists":
      return filter.where === undefined ? filter : { ...filter, where: replace(filter.where, from, to) }
    case "isNull":
      return filter
    case "in":
    case "notIn":
      return { ...filter, value: filter.value.map(value) }
    default:
      return { ...filter, value: value(filter.value) }
  }
}

/**
 * `scope` with `parameter` for `subject`; undefined when no template can stand for it
 * exactly (the subject is the parameter, or the scope holds the parameter's text already).
 */
export const template = (scope: RowScope.RowScope, subject: string): RowScope.RowScope | undefined => {
  if (scope._tag !== "Where") return scope
  if (subject === parameter || mentions(scope.filter, parameter)) return undefined
  return RowScope.where(replace(scope.filter, subject, parameter))
}

/** The scope `template` stands for with `subject`: `instantiate(template(scope, s), s)` is `scope`. */
export const instantiate = (template: RowScope.RowScope, subject: string): RowScope.RowScope =>
  template._tag === "Where" ? RowScope.where(replace(template.filter, parameter, subject)) : template

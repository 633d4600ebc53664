/**
 * Compiles the filter language (query filters and policy scope filters) to a SQL
 * condition. The compiled form keeps SQLite's three-valued logic, which is also what
 * the policy package's in-memory evaluator follows: a comparison with NULL is unknown
 * and an unknown row does not qualify. `startsWith`/`contains` are case-sensitive.
 */
import type { RowScope } from "@cairn/catalog"
import type { Path } from "@cairn/domain/QueryDocument"
import * as S from "./sql.js"

type ScopeFilter = RowScope.ScopeFilter
export type ExistsFilter = Extract<ScopeFilter, { readonly op: "exists" }>

export interface FilterTarget {
  /** The SQL value at `path` of the row being filtered (NULL when a hop is absent). */
  readonly valueAt: (path: Path) => S.Sql
  /** `exists` over another entity; only scope filters use it. */
  readonly exists: (filter: ExistsFilter) => S.Sql
}

const comparators = { eq: "=", ne: "<>", lt: "<", lte: "<=", gt: ">", gte: ">=" } as const

export const filterSql = (filter: ScopeFilter, target: FilterTarget): S.Sql => {
  switch (filter.op) {
    case "and":
      return S.and(filter.filters.map((f) => filterSql(f, target)))
    case "or":
      return S.or(filter.filters.map((f) => filterSql(f, target)))
    case "not": {
      const inner = filterSql(filter.filter, target)
      return inner === S.TRUE ? S.FALSE : inner === S.FALSE ? S.TRUE : S.sql`(NOT ${inner})`
    }
    case "isNull":
      return S.sql`(${target.valueAt(filter.path)} IS NULL)`
    case "exists":
      return target.exists(filter)
    case "in":
    case "notIn": {
      // SQLite: `x IN ()` is false and `x NOT IN ()` true, even for NULL x.
      if (filter.value.length === 0) return filter.op === "in" ? S.FALSE : S.TRUE
      const list = S.join(filter.value.map(S.param), ", ")
      return S.sql`(${target.valueAt(filter.path)} ${S.raw(filter.op === "in" ? "IN" : "NOT IN")} (${list}))`
    }
    case "startsWith":
      return S.sql`(instr(${target.valueAt(filter.path)}, ${S.param(filter.value)}) = 1)`
    case "contains":
      return S.sql`(instr(${target.valueAt(filter.path)}, ${S.param(filter.value)}) > 0)`
    default:
      return S.sql`(${target.valueAt(filter.path)} ${S.raw(comparators[filter.op])} ${S.param(filter.value)})`
  }
}

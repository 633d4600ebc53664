/**
 * Compiles a principal's row scope (from `View.rowScope`) to a SQL condition over one
 * aliased row of an entity: the planner ANDs it into every query, and mutation guards
 * and sync reuse it to ask "is row X within the principal's row scope". Scope filters
 * come from compiled policy, so their paths read through relationships without
 * applying the target's own scope (policy is trusted, as in the in-memory evaluator).
 */
import { Statement } from "@effect/sql"
import type { RowScope } from "@cairn/catalog"
import type { Catalog } from "@cairn/catalog/Catalog"
import type { View } from "@cairn/catalog/View"
import type { Path } from "@cairn/domain/QueryDocument"
import { filterSql } from "./internal/filterSql.js"
import * as S from "./internal/sql.js"

/** Fresh aliases for the subqueries one compiled condition needs, unique per prefix. */
export const aliasesFor = (prefix: string): (() => string) => {
  let n = 0
  return () => `${prefix}_${++n}`
}

/** The value at `path` of the row `alias` of `entity`: hops become correlated scalar subqueries. */
const valueAt = (catalog: Catalog, entity: string, alias: string, path: Path, fresh: () => string): S.Sql => {
  let current = entity
  let value: S.Sql | undefined
  for (const [i, segment] of path.entries()) {
    const last = i === path.length - 1
    if (last) {
      if (segment !== "id" && !catalog.entity(current)?.field(segment)) throw new Error(`scope path over ${entity} does not resolve`)
      if (value === undefined) return S.column(alias, segment)
      return value
    }
    const rel = catalog.entity(current)?.relationship(segment)
    if (!rel) throw new Error(`scope path over ${entity} does not resolve`)
    const next = path[i + 1]!
    const nextColumn = i + 1 === path.length - 1 ? next : catalog.entity(rel.target)?.relationship(next)?.via ?? next
    const hop = fresh()
    const from = value ?? S.column(alias, rel.via)
    value = S.sql`(SELECT ${S.column(hop, nextColumn)} FROM ${S.ident(rel.target)} AS ${S.ident(hop)} WHERE ${S.column(hop, "id")} = ${from})`
    current = rel.target
  }
  return value!
}

/** A scope filter over row `alias` of `entity`, as a SQL condition. */
export const scopeFilterSql = (
  catalog: Catalog,
  entity: string,
  filter: RowScope.ScopeFilter,
  alias: string,
  fresh: () => string = aliasesFor(alias)
): S.Sql =>
  filterSql(filter, {
    valueAt: (path) => valueAt(catalog, entity, alias, path, fresh),
    exists: (f) => {
      const inner = fresh()
      const where = f.where === undefined ? S.TRUE : scopeFilterSql(catalog, f.entity, f.where, inner, fresh)
      const outer = valueAt(catalog, entity, alias, f.path, fresh)
      return S.sql`EXISTS (SELECT 1 FROM ${S.ident(f.entity)} AS ${S.ident(inner)} WHERE ${S.and([
        S.sql`${S.column(inner, f.field)} = ${outer}`,
        where
      ])})`
    }
  })

/** The row scope of `entity` for the view's principal, over row `alias`: `1` for all, `0` for none. */
export const scopeCondition = (view: View, entity: string, alias: string, fresh: () => string = aliasesFor(alias)): S.Sql => {
  const scope = view.rowScope(entity)
  return scope._tag === "All" ? S.TRUE : scope._tag === "None" ? S.FALSE : scopeFilterSql(view.catalog, entity, scope.filter, alias, fresh)
}

/**
 * `scopeCondition` as an `@effect/sql` fragment, to interpolate into a statement, e.g.
 * sql`SELECT 1 FROM "Task" AS "t" WHERE "t"."id" = ${id} AND ${scopeSql(view, "Task", "t")}`.
 * `alias` must be an identifier; the subqueries it needs use aliases prefixed with it.
 */
export const scopeSql = (view: View, entity: string, alias: string): Statement.Fragment => {
  const condition = scopeCondition(view, entity, alias)
  return Statement.unsafeFragment(condition.text, condition.params)
}

/**
 * Turns a plan into the ONE statement that reads a page. Besides the page rows it
 * yields a basis row (the last commit position, read in the same statement and so the
 * same snapshot as the page) and, when the budget ran out, a sentinel row. Rows are
 * told apart by the id column: text in a page row, the position (a number) in the
 * basis row, NULL in the sentinel.
 *
 * Work is bounded for real: candidate rows of the root table come from an inner scan
 * with `LIMIT maxRowsExamined + 1` (index chosen with INDEXED BY / NOT INDEXED, so the
 * plan is ours, not the optimizer's guess), and every other condition (remaining
 * filter, row scope, joins) runs outside it. For an `Ordered` access the inner scan is
 * an index walk in the page's order whose keyset continuation is a union of exact
 * index ranges (one per key position, NULLs handled explicitly), so it never skips
 * rows it does not count; the page stops after `first + 1` matches, and the sentinel
 * (evaluated only when the page came up short) tells a true end from an exhausted
 * budget. When nothing runs outside the walk, every candidate matches, so the walk is
 * the page itself. For a `Sorted` access the inner scan reads the seek's rows
 * unordered and the page sorts them; the sentinel is always evaluated, since a
 * truncated sort would be wrong.
 */
import type { View } from "@cairn/catalog/View"
import type { Direction, Filter, Path } from "@cairn/domain/QueryDocument"
import { aliasesFor, scopeCondition } from "../ScopeSql.js"
import { filterSql } from "./filterSql.js"
import type { Plan } from "./plan.js"
import * as S from "./sql.js"

const ROOT = "r"

export interface PageStatement {
  readonly sql: S.Sql
  /** Where the sort key (ending with the id) and each selection sit in a result row. */
  readonly keyColumns: ReadonlyArray<number>
  readonly selectColumns: ReadonlyArray<number>
}

interface Step {
  readonly prefix: ReadonlyArray<S.Sql>
  readonly after: S.Sql
}

/**
 * The rows strictly after `cursor` in the order (`keys` ascending or descending, NULL
 * lowest), as disjoint steps in output order: the last key first (same prefix, later
 * id), then each earlier position. `nullable[i]` false lets a step skip NULL handling.
 */
const steps = (
  keys: ReadonlyArray<S.Sql>,
  directions: ReadonlyArray<Direction>,
  nullable: ReadonlyArray<boolean>,
  cursor: ReadonlyArray<S.Bindable>
): ReadonlyArray<Step> => {
  const out: Array<Step> = []
  for (let i = keys.length - 1; i >= 0; i--) {
    const prefix = keys.slice(0, i).map((k, j) => (cursor[j] === null ? S.sql`${k} IS NULL` : S.sql`${k} = ${S.param(cursor[j]!)}`))
    const key = keys[i]!
    const value = cursor[i]!
    if (directions[i] === "asc") {
      out.push({ prefix, after: value === null ? S.sql`${key} IS NOT NULL` : S.sql`${key} > ${S.param(value)}` })
    } else if (value !== null) {
      out.push({ prefix, after: S.sql`${key} < ${S.param(value)}` })
      if (nullable[i]) out.push({ prefix, after: S.sql`${key} IS NULL` })
    }
  }
  return out
}

/**
 * A page's LIMIT, written into the text: SQLite plans a constant LIMIT better than a bound one
 * (a page read costs ~15 % less), and the page size is part of a cached plan's shape anyway.
 */
const limit = (n: number): S.Sql => (Number.isSafeInteger(n) && n >= 0 ? S.raw(String(n)) : S.param(n))

const dir = (d: Direction) => S.raw(d === "asc" ? "ASC" : "DESC")

export const pageStatement = (
  view: View,
  plan: Plan,
  cursor: ReadonlyArray<S.Bindable> | undefined,
  maxRowsExamined: number
): PageStatement => {
  const entity = plan.entity
  const table = S.ident(entity.name)
  const joinAlias = new Map<string, string>([["", ROOT]])
  plan.joins.forEach((j, i) => joinAlias.set(j.key, `j${i + 1}`))
  const at = (path: Path): S.Sql => S.column(joinAlias.get(path.slice(0, -1).join("."))!, path[path.length - 1]!)

  // Each distinct expression is read once: the id usually is both a key and a selection.
  const columns: Array<S.Sql> = []
  const columnOf = (expr: S.Sql) => {
    const found = columns.findIndex((c) => c.text === expr.text)
    return found >= 0 ? found : columns.push(expr) - 1
  }
  const keyExprs = plan.order.map((o) => S.column(joinAlias.get(o.resolved.owner)!, o.resolved.field.name))
  const keyColumns = keyExprs.map(columnOf)
  const selectColumns = plan.select.map((s) => columnOf(S.column(joinAlias.get(s.resolved.owner)!, s.resolved.field.name)))
  const idColumn = keyColumns[keyColumns.length - 1]!
  const directions = plan.order.map((o) => o.direction)
  const nullable = plan.order.map((o) => o.resolved.field.nullable || o.resolved.hops.length > 0)
  const nullsExcept = (column: number, value: S.Sql) =>
    S.join(columns.map((_, i) => (i === column ? value : S.raw("NULL"))), ", ")

  const rootScope = scopeCondition(view, entity.name, ROOT)
  const hint = S.raw(plan.access.index === undefined ? "NOT INDEXED" : `INDEXED BY ${S.ident(plan.access.index).text}`)
  const from = S.sql`${table} AS ${S.ident(ROOT)} ${hint}`
  const seek = plan.access.seek.map((s) =>
    s.value === null ? S.sql`${S.ident(s.column)} IS NULL` : S.sql`${S.ident(s.column)} = ${S.param(s.value)}`
  )
  const pageLimit = limit(plan.first + 1)
  const basis = S.sql`SELECT ${nullsExcept(idColumn, S.raw(`(SELECT coalesce(max("position"), 0) FROM "_cairn_commits")`))}`
  const selected = S.join(columns, ", ")

  if (plan.access._tag === "Ordered") {
    const innerKeys = plan.order.map((o) => S.ident(o.resolved.field.name))
    const orderBy = S.join(innerKeys.map((k, i) => S.sql`${k} ${dir(directions[i]!)}`), ", ")
    const walk = (what: S.Sql, limit: S.Sql) => {
      const arm = (conditions: ReadonlyArray<S.Sql>) =>
        S.sql`SELECT ${what} FROM ${from} WHERE ${S.and([rootScope === S.FALSE ? S.FALSE : S.TRUE, ...seek, ...conditions])} ORDER BY ${orderBy} LIMIT ${limit}`
      if (cursor === undefined) return arm([])
      // Never empty: the id step always exists, since ids are never NULL.
      const arms = steps(innerKeys, directions, nullable, cursor).map((s) => S.sql`SELECT * FROM (${arm([...s.prefix, s.after])})`)
      return arms.length === 1 ? arms[0]! : S.sql`${S.join(arms, " UNION ALL ")} LIMIT ${limit}`
    }
    if (plan.joins.length === 0 && plan.rest === undefined && rootScope === S.TRUE) {
      // Nothing runs outside the walk: every candidate is a match and the walk is the page.
      return { sql: S.sql`${basis} UNION ALL SELECT * FROM (${walk(selected, pageLimit)})`, keyColumns, selectColumns }
    }
    const inner = walk(S.raw("*"), S.raw(String(maxRowsExamined + 1)))
    const page = S.sql`SELECT ${selected} FROM (${inner}) AS ${S.ident(ROOT)}${outside(view, plan, joinAlias, at, rootScope, S.TRUE)} LIMIT ${pageLimit}`
    const sentinel = S.sql`SELECT ${nullsExcept(-1, S.TRUE)} FROM (SELECT 1 FROM (${inner}) LIMIT 1 OFFSET ${S.raw(String(maxRowsExamined))})`
    // The sentinel comes last and the compound stops once the page is full, so it runs
    // only when the page came up short.
    return {
      sql: S.sql`${basis} UNION ALL SELECT * FROM (${page}) UNION ALL ${sentinel} LIMIT ${limit(plan.first + 2)}`,
      keyColumns,
      selectColumns
    }
  }

  const inner = S.sql`SELECT * FROM ${from} WHERE ${S.and([rootScope === S.FALSE ? S.FALSE : S.TRUE, ...seek])} LIMIT ${S.raw(String(maxRowsExamined + 1))}`
  const keyset = cursor === undefined ? S.TRUE : S.or(steps(keyExprs, directions, nullable, cursor).map((s) => S.and([...s.prefix, s.after])))
  const orderBy = S.join(keyExprs.map((k, i) => S.sql`${k} ${dir(directions[i]!)}`), ", ")
  const page = S.sql`SELECT ${selected} FROM (${inner}) AS ${S.ident(ROOT)}${outside(view, plan, joinAlias, at, rootScope, keyset)} ORDER BY ${orderBy} LIMIT ${pageLimit}`
  const sentinel = S.sql`SELECT ${nullsExcept(-1, S.TRUE)} FROM (SELECT 1 FROM (${inner}) LIMIT 1 OFFSET ${S.raw(String(maxRowsExamined))})`
  return { sql: S.sql`${basis} UNION ALL ${sentinel} UNION ALL SELECT * FROM (${page})`, keyColumns, selectColumns }
}

/** Joins (each carrying its target's row scope) and the conditions that run on every candidate. */
const outside = (
  view: View,
  plan: Plan,
  joinAlias: ReadonlyMap<string, string>,
  at: (path: Path) => S.Sql,
  rootScope: S.Sql,
  keyset: S.Sql
): S.Sql => {
  const joins = plan.joins.map((j) => {
    const alias = joinAlias.get(j.key)!
    // The target's row scope is part of the join: a row the caller may not see is absent (NULL).
    return S.sql` LEFT JOIN ${S.ident(j.relationship.target)} AS ${S.ident(alias)} ON ${S.and([
      S.sql`${S.column(alias, "id")} = ${S.column(joinAlias.get(j.parent)!, j.relationship.via)}`,
      scopeCondition(view, j.relationship.target, alias, aliasesFor(alias))
    ])}`
  })
  const filter = plan.rest === undefined ? S.TRUE : filterSql(plan.rest as Filter, { valueAt: at, exists: () => S.FALSE })
  // A filter on a joined column (project.name = ?) would let SQLite turn the LEFT JOIN
  // into an inner join and loop over the joined table first, so an Ordered walk would
  // come back in the joined table's order. SQLite never reorders an outer join, and it
  // does not look inside CASE when deciding a term rejects NULLs: wrapping the filter
  // keeps the walk the outer loop. Same truth value: NULL and 0 both reject the row.
  const rest = filter === S.TRUE || plan.joins.length === 0 ? filter : S.sql`CASE WHEN ${filter} THEN 1 ELSE 0 END`
  return S.sql`${S.join(joins, "")} WHERE ${S.and([rest, rootScope, keyset])}`
}

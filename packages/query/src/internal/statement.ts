/**
 * Turns a plan into the ONE statement that reads a page. Its result rows are tagged:
 * the basis row (the last commit position, read in the same statement and therefore
 * the same snapshot as the page), the page rows, and a sentinel that exists only when
 * more than `maxRowsExamined` candidate rows would have to be examined.
 *
 * Work is bounded for real: candidate rows of the root table come from an inner scan
 * with `LIMIT maxRowsExamined + 1` (index chosen with INDEXED BY / NOT INDEXED, so the
 * plan is ours, not the optimizer's guess), and every other condition (remaining
 * filter, row scope, joins) runs outside it. For an `Ordered` access the inner scan is
 * an index walk in the page's order whose keyset continuation is a union of exact
 * index ranges (one per key position, NULLs handled explicitly), so it never skips
 * rows it does not count; the page stops after `first + 1` matches, and the sentinel
 * (evaluated only when the page came up short) tells a true end from an exhausted
 * budget. For a `Sorted` access the inner scan reads the seek's rows unordered and
 * the page sorts them; the sentinel is always evaluated, since a truncated sort would
 * be wrong.
 */
import type { Direction, Filter, Path } from "@cairn/domain"
import type { View } from "@cairn/catalog"
import { filterSql } from "./filterSql.js"
import type { Plan } from "./plan.js"
import * as S from "./sql.js"
import { aliasesFor, scopeCondition } from "../ScopeSql.js"

export const ROW = 1
export const BASIS = 0
export const SENTINEL = 2

const ROOT = "r"

/** Columns of every result row: tag, basis position, the sort key, then the selections. */
export interface PageStatement {
  readonly sql: S.Sql
  readonly keyCount: number
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

  const keyExprs = plan.order.map((o) => S.column(joinAlias.get(o.resolved.owner)!, o.resolved.field.name))
  const directions = plan.order.map((o) => o.direction)
  const nullable = plan.order.map((o) => o.resolved.field.nullable || o.resolved.hops.length > 0)
  const selectExprs = plan.select.map((s) => S.column(joinAlias.get(s.resolved.owner)!, s.resolved.field.name))
  const width = 2 + keyExprs.length + selectExprs.length
  const nulls = (n: number) => S.raw(Array.from({ length: n }, () => "NULL").join(", "))

  const rootScope = scopeCondition(view, entity.name, ROOT)
  const hint = S.raw(plan.access.index === undefined ? "NOT INDEXED" : `INDEXED BY ${S.ident(plan.access.index).text}`)
  const seek = plan.access.seek.map((s) =>
    s.value === null ? S.sql`${S.ident(s.column)} IS NULL` : S.sql`${S.ident(s.column)} = ${S.param(s.value)}`
  )
  const bound = S.raw(String(maxRowsExamined + 1))
  const ordered = plan.access._tag === "Ordered"

  let inner: S.Sql
  if (rootScope === S.FALSE) {
    // Nothing of this entity is visible: read nothing at all.
    inner = S.sql`SELECT * FROM ${table} WHERE 0`
  } else if (ordered) {
    const innerKeys = plan.order.map((o) => S.ident(o.resolved.field.name))
    const orderBy = S.join(innerKeys.map((k, i) => S.sql`${k} ${dir(directions[i]!)}`), ", ")
    const arm = (conditions: ReadonlyArray<S.Sql>) =>
      S.sql`SELECT * FROM ${table} ${hint} WHERE ${S.and([...seek, ...conditions])} ORDER BY ${orderBy} LIMIT ${bound}`
    if (cursor === undefined) inner = arm([])
    else {
      // Never empty: the id step always exists, since ids are never NULL.
      const arms = steps(innerKeys, directions, nullable, cursor).map((s) => S.sql`SELECT * FROM (${arm([...s.prefix, s.after])})`)
      inner = S.sql`${S.join(arms, " UNION ALL ")} LIMIT ${bound}`
    }
  } else {
    inner = S.sql`SELECT * FROM ${table} ${hint} WHERE ${S.and(seek)} LIMIT ${bound}`
  }

  const joins = plan.joins.map((j) => {
    const alias = joinAlias.get(j.key)!
    const scope = scopeCondition(view, j.relationship.target, alias, aliasesFor(alias))
    // The target's row scope is part of the join: a row the caller may not see is absent (NULL).
    return S.sql` LEFT JOIN ${S.ident(j.relationship.target)} AS ${S.ident(alias)} ON ${S.and([
      S.sql`${S.column(alias, "id")} = ${S.column(joinAlias.get(j.parent)!, j.relationship.via)}`,
      scope
    ])}`
  })
  const rest = plan.rest === undefined ? S.TRUE : filterSql(plan.rest as Filter, { valueAt: at, exists: () => S.FALSE })
  const keyset = !ordered && cursor !== undefined
    ? S.or(steps(keyExprs, directions, nullable, cursor).map((s) => S.and([...s.prefix, s.after])))
    : S.TRUE
  const where = S.and([rest, rootScope, keyset])
  const columns = S.join([S.raw(String(ROW)), S.raw("NULL"), ...keyExprs, ...selectExprs], ", ")
  const pageLimit = S.param(plan.first + 1)
  const body = S.sql`SELECT ${columns} FROM (${inner}) AS ${S.ident(ROOT)}${S.join(joins, "")} WHERE ${where}`
  const page = ordered
    ? S.sql`${body} LIMIT ${pageLimit}`
    : S.sql`${body} ORDER BY ${S.join(keyExprs.map((k, i) => S.sql`${k} ${dir(directions[i]!)}`), ", ")} LIMIT ${pageLimit}`

  const basis = S.sql`SELECT ${S.raw(String(BASIS))}, (SELECT coalesce(max("position"), 0) FROM "_cairn_commits"), ${nulls(width - 2)}`
  const sentinel = S.sql`SELECT ${S.raw(String(SENTINEL))}, ${nulls(width - 1)} FROM (SELECT 1 FROM (${inner}) LIMIT 1 OFFSET ${S.raw(String(maxRowsExamined))})`
  const statement = ordered
    ? // The sentinel comes last and the compound stops once the page is full, so it
      // runs only when the page came up short.
      S.sql`${basis} UNION ALL SELECT * FROM (${page}) UNION ALL ${sentinel} LIMIT ${S.param(plan.first + 2)}`
    : S.sql`${basis} UNION ALL ${sentinel} UNION ALL SELECT * FROM (${page})`
  return { sql: statement, keyCount: keyExprs.length }
}

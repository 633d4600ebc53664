/**
 * In-memory evaluation of a `ScopeFilter` over one record, for sync's change filtering
 * and as the oracle of the SQL scope compiler. It follows SQLite's semantics for the SQL
 * a filter naturally compiles to: three-valued logic (a comparison with NULL is
 * unknown, and an unknown row does not qualify), cross-type ordering numbers < text,
 * text compared bytewise as UTF-8, booleans as 0/1, and case-sensitive
 * `startsWith`/`contains`.
 */
import { type Catalog, RowScope } from "@cairn/catalog"
import type { Scalar } from "@cairn/domain"
import { resolvePath } from "./internal/paths.js"

/** A record in its plain JSON form: `id` plus fields; an absent optional field is null. */
export type RecordValue = Readonly<Record<string, unknown>>

/**
 * Rows of `entity` whose `field` (or `id`) equals `value`. Relationship paths and
 * `exists` read through it; it sees every row, since policy filters are trusted.
 */
export type Lookup = (entity: string, field: string, value: Scalar) => ReadonlyArray<RecordValue>

type Truth = boolean | null

const normalize = (v: unknown): string | number | null =>
  v === undefined || v === null ? null : typeof v === "boolean" ? (v ? 1 : 0) : typeof v === "number" || typeof v === "string" ? v : null

/** SQLite ordering: numbers before text, text by UTF-8 bytes (BINARY collation). */
const order = (a: string | number, b: string | number): number => {
  if (typeof a === "number" && typeof b === "number") return a < b ? -1 : a > b ? 1 : 0
  if (typeof a === "number") return -1
  if (typeof b === "number") return 1
  return Buffer.compare(Buffer.from(a as string, "utf8"), Buffer.from(b as string, "utf8"))
}

const not3 = (t: Truth): Truth => (t === null ? null : !t)

const valueAt = (catalog: Catalog, entity: string, path: ReadonlyArray<string>, record: RecordValue, lookup: Lookup): unknown => {
  const resolved = resolvePath(catalog, entity, path)
  if (typeof resolved === "string") throw new Error(`scope filter over ${entity}: ${resolved}`)
  let current: RecordValue | undefined = record
  for (const hop of resolved.hops) {
    const id: unknown = current[hop.via]
    if (typeof id !== "string") return null
    current = lookup(hop.target, "id", id)[0]
    if (current === undefined) return null
  }
  return current[resolved.field.name]
}

const evaluate3 = (catalog: Catalog, entity: string, filter: RowScope.ScopeFilter, record: RecordValue, lookup: Lookup): Truth => {
  switch (filter.op) {
    case "and": {
      let result: Truth = true
      for (const f of filter.filters) {
        const t = evaluate3(catalog, entity, f, record, lookup)
        if (t === false) return false
        if (t === null) result = null
      }
      return result
    }
    case "or": {
      let result: Truth = false
      for (const f of filter.filters) {
        const t = evaluate3(catalog, entity, f, record, lookup)
        if (t === true) return true
        if (t === null) result = null
      }
      return result
    }
    case "not":
      return not3(evaluate3(catalog, entity, filter.filter, record, lookup))
    case "isNull":
      return normalize(valueAt(catalog, entity, filter.path, record, lookup)) === null
    case "exists": {
      const raw = valueAt(catalog, entity, filter.path, record, lookup)
      const outer = normalize(raw)
      if (outer === null) return false
      const where = filter.where
      return lookup(filter.entity, filter.field, raw as Scalar).some(
        (row) => normalize(row[filter.field]) === outer && (where === undefined || evaluate3(catalog, filter.entity, where, row, lookup) === true)
      )
    }
    case "in":
    case "notIn": {
      // SQLite: `x IN ()` is false and `x NOT IN ()` true, even when x is NULL.
      if (filter.value.length === 0) return filter.op === "notIn"
      const v = normalize(valueAt(catalog, entity, filter.path, record, lookup))
      if (v === null) return null
      const values = filter.value.map(normalize)
      const found: Truth = values.some((w) => w !== null && order(v, w) === 0) ? true : values.includes(null) ? null : false
      return filter.op === "in" ? found : not3(found)
    }
    default: {
      const v = normalize(valueAt(catalog, entity, filter.path, record, lookup))
      const w = normalize(filter.value)
      if (v === null || w === null) return null
      switch (filter.op) {
        case "eq":
          return order(v, w) === 0
        case "ne":
          return order(v, w) !== 0
        case "lt":
          return order(v, w) < 0
        case "lte":
          return order(v, w) <= 0
        case "gt":
          return order(v, w) > 0
        case "gte":
          return order(v, w) >= 0
        case "startsWith":
          return typeof v === "string" && typeof w === "string" && v.startsWith(w)
        case "contains":
          return typeof v === "string" && typeof w === "string" && v.includes(w)
      }
    }
  }
}

/** Whether `record` of `entity` satisfies `filter` (unknown counts as not). */
export const evaluate = (
  catalog: Catalog,
  entity: string,
  filter: RowScope.ScopeFilter,
  record: RecordValue,
  lookup: Lookup
): boolean => evaluate3(catalog, entity, filter, record, lookup) === true

/** Whether `record` of `entity` lies in `scope`. */
export const inScope = (
  catalog: Catalog,
  entity: string,
  scope: RowScope.RowScope,
  record: RecordValue,
  lookup: Lookup
): boolean => (scope._tag === "All" ? true : scope._tag === "None" ? false : evaluate(catalog, entity, scope.filter, record, lookup))

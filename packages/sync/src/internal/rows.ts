/**
 * Reads of entity rows on a database's read-only connection, decoded into the plain
 * records policy evaluates, with a per-batch cache for the evaluator's lookups.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Catalog } from "@cairn/catalog/Catalog"
import type { Scalar } from "@cairn/domain/QueryDocument"
import type { LookupEffect, RecordValue } from "@cairn/policy/Evaluate"
import { Layout } from "@cairn/store"
import { Effect } from "effect"

/** A stable key for a scalar as SQLite compares it (booleans are 0/1). */
export const norm = (v: unknown): string => JSON.stringify(v === undefined ? null : typeof v === "boolean" ? (v ? 1 : 0) : v)

/** Equalities every row a lookup of (entity, field) is asked for must satisfy to matter. */
export type Narrowing = (entity: string, field: string) => ReadonlyArray<readonly [string, Scalar]> | undefined

export interface Rows {
  /** Rows of `entity` whose `field` (or `id`) is one of `values`. */
  readonly where: (entity: string, field: string, values: ReadonlyArray<Scalar>) => Effect.Effect<ReadonlyArray<RecordValue>, SqlError.SqlError>
  /** The evaluator's lookup, cached for the life of this value. */
  readonly lookup: LookupEffect<SqlError.SqlError, never>
}

/**
 * Row reads for one consistent state. `cache` may be shared by every reader of the same
 * state (the same database at the same last committed position), since a lookup's answer
 * depends on nothing else.
 */
export const rows = (
  catalog: Catalog,
  reader: SqlClient.SqlClient,
  cache: Map<string, ReadonlyArray<RecordValue>> = new Map(),
  narrowing: Narrowing = () => undefined
): Rows => {
  const bind = (entity: string, field: string, value: Scalar) => {
    const f = field === "id" ? undefined : catalog.entity(entity)?.field(field)
    return f ? Layout.encodeValue(f, value) : value
  }
  const select = (entity: string, field: string, values: ReadonlyArray<Scalar>, also: ReadonlyArray<readonly [string, Scalar]>) => {
    const compiled = catalog.entity(entity)!
    if (values.length === 0) return Effect.succeed([])
    const conditions = [
      `${Layout.quote(field)} IN (${values.map(() => "?").join(", ")})`,
      ...also.map(([f]) => `${Layout.quote(f)} = ?`)
    ]
    return Effect.map(
      reader.unsafe<Record<string, unknown>>(`SELECT * FROM ${Layout.tableName(compiled)} WHERE ${conditions.join(" AND ")}`, [
        ...values.map((v) => bind(entity, field, v)),
        ...also.map(([f, v]) => bind(entity, f, v))
      ]),
      (found) => found.map((row) => Layout.decodeRecord(compiled, row))
    )
  }
  const where: Rows["where"] = (entity, field, values) => select(entity, field, values, [])
  // Lookups skip rows no asker could accept (e.g. other subjects' memberships), so a
  // project with many members costs one row per principal, not one per member.
  const lookup: Rows["lookup"] = (entity, field, value) => {
    const also = narrowing(entity, field) ?? []
    const key = `${entity}\u0000${field}\u0000${norm(value)}\u0000${norm(also)}`
    const hit = cache.get(key)
    return hit ? Effect.succeed(hit) : Effect.tap(select(entity, field, [value], also), (found) => cache.set(key, found))
  }
  return { where, lookup }
}

/**
 * Reads of entity rows on a database's read-only connection, decoded into the plain
 * records policy evaluates, with a per-batch cache for the evaluator's lookups.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Catalog } from "@cairn/catalog"
import type { Scalar } from "@cairn/domain"
import type { LookupEffect, RecordValue } from "@cairn/policy"
import { Layout } from "@cairn/store"
import { Effect } from "effect"

/** A stable key for a scalar as SQLite compares it (booleans are 0/1). */
export const norm = (v: unknown): string => JSON.stringify(v === undefined ? null : typeof v === "boolean" ? (v ? 1 : 0) : v)

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
  cache: Map<string, ReadonlyArray<RecordValue>> = new Map()
): Rows => {
  const bind = (entity: string, field: string, value: Scalar) => {
    const f = field === "id" ? undefined : catalog.entity(entity)?.field(field)
    return f ? Layout.encodeValue(f, value) : value
  }
  const where: Rows["where"] = (entity, field, values) => {
    const compiled = catalog.entity(entity)!
    if (values.length === 0) return Effect.succeed([])
    return Effect.map(
      reader.unsafe<Record<string, unknown>>(
        `SELECT * FROM ${Layout.tableName(compiled)} WHERE ${Layout.quote(field)} IN (${values.map(() => "?").join(", ")})`,
        values.map((v) => bind(entity, field, v))
      ),
      (found) => found.map((row) => Layout.decodeRecord(compiled, row))
    )
  }
  const lookup: Rows["lookup"] = (entity, field, value) => {
    const key = `${entity}\u0000${field}\u0000${norm(value)}`
    const hit = cache.get(key)
    return hit ? Effect.succeed(hit) : Effect.tap(where(entity, field, [value]), (found) => cache.set(key, found))
  }
  return { where, lookup }
}

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

/** The keys of a narrowing's equalities, made once per (stable) narrowing array: every lookup of every stream builds them. */
interface AlsoKeys {
  readonly norm: string
  readonly signature: string
  readonly values: string
  readonly indexable: boolean
}
const alsoKeysOf = new WeakMap<ReadonlyArray<readonly [string, Scalar]>, AlsoKeys>()
const alsoKeys = (also: ReadonlyArray<readonly [string, Scalar]>): AlsoKeys => {
  let keys = alsoKeysOf.get(also)
  if (keys === undefined) {
    keys = {
      norm: norm(also),
      signature: also.map(([f]) => f).join("\u0000"),
      values: also.map(([, v]) => norm(v)).join("\u0000"),
      indexable: also.every(([, v]) => indexable(v))
    }
    alsoKeysOf.set(also, keys)
  }
  return keys
}
const noAlso: ReadonlyArray<readonly [string, Scalar]> = []

/** Equalities every row a lookup of (entity, field) is asked for must satisfy to matter. */
export type Narrowing = (entity: string, field: string) => ReadonlyArray<readonly [string, Scalar]> | undefined

export interface Rows {
  /** Rows of `entity` whose `field` (or `id`) is one of `values`. */
  readonly where: (entity: string, field: string, values: ReadonlyArray<Scalar>) => Effect.Effect<ReadonlyArray<RecordValue>, SqlError.SqlError>
  /** The evaluator's lookup, cached for the life of this value. */
  readonly lookup: LookupEffect<SqlError.SqlError, never>
  /** Every row of `entity` whose `field` is `value`, unnarrowed; undefined when there are more than a shared read may hold. */
  readonly every: (entity: string, field: string, value: Scalar) => Effect.Effect<ReadonlyArray<RecordValue> | undefined, SqlError.SqlError>
}

/**
 * The answer `rows(catalog, reader, cache, narrowing, wide).lookup` would give without
 * reading anything, if it is known (cached, or in a shared read of `wide`).
 */
export const peek = (
  cache: Map<string, ReadonlyArray<RecordValue>>,
  narrowing: Narrowing,
  wide: Wide | undefined
) => {
  // The last answer found: a replay asks the same lookup for a record's start and its end.
  let last: { readonly entity: string; readonly field: string; readonly value: Scalar; readonly found: ReadonlyArray<RecordValue> } | undefined
  const find = (entity: string, field: string, value: Scalar): ReadonlyArray<RecordValue> | undefined => {
    const also = narrowing(entity, field) ?? noAlso
    const keys = alsoKeys(also)
    // Rows read once for every asker answer from their index, without a key of this asker's own
    // (`fromWide` gives what the narrowed statement would, so the order of the two checks is free).
    if (wide !== undefined && also.length > 0 && keys.indexable) {
      const shared = wideEntry(wide, entity, field, value)
      if (shared?.rows !== undefined) return indexed(shared, also)
    }
    return cache.get(`${entity}\u0000${field}\u0000${norm(value)}\u0000${keys.norm}`)
  }
  return (entity: string, field: string, value: Scalar): ReadonlyArray<RecordValue> | undefined => {
    if (last !== undefined && last.value === value && last.field === field && last.entity === entity) return last.found
    const found = find(entity, field, value)
    if (found !== undefined) last = { entity, field, value, found }
    return found
  }
}

type WideEntry = Wide["entries"] extends Map<string, infer E> ? E : never
/**
 * The shared entry of (entity, field, value), if any. The last one found is kept: every asker
 * of a commit looks up the same rows (e.g. the members of the changed task's project).
 */
const wideEntry = (wide: Wide, entity: string, field: string, value: Scalar): WideEntry | undefined => {
  const last = wide.last
  if (last !== undefined && last.value === value && last.field === field && last.entity === entity) return last.entry
  const entry = wide.entries.get(`${entity}\u0000${field}\u0000${norm(value)}`)
  // An entry stays the same object (its rows are filled in once read).
  if (entry !== undefined) wide.last = { entity, field, value, entry }
  return entry
}
/** The rows of a shared read that meet `also`, cached under `key`. */
const fromWide = (
  shared: WideEntry,
  also: ReadonlyArray<readonly [string, Scalar]>,
  cache: Map<string, ReadonlyArray<RecordValue>>,
  key: string
): ReadonlyArray<RecordValue> => {
  const found = indexed(shared, also)
  cache.set(key, found)
  return found
}
/** The rows of a shared read that meet `also`, indexed once per set of narrowing fields. */
const indexed = (shared: WideEntry, also: ReadonlyArray<readonly [string, Scalar]>): ReadonlyArray<RecordValue> => {
  const keys = alsoKeys(also)
  const signature = keys.signature
  let index = shared.index.get(signature)
  if (index === undefined) {
    shared.index.set(signature, (index = new Map()))
    for (const row of shared.rows!) {
      if (!also.every(([f]) => indexable(row[f]))) continue
      const k = also.map(([f]) => norm(row[f])).join("\u0000")
      const bucket = index.get(k)
      if (bucket) bucket.push(row)
      else index.set(k, [row])
    }
  }
  return index.get(keys.values) ?? noRows
}
const noRows: ReadonlyArray<RecordValue> = []

/**
 * Unnarrowed lookup answers shared by many askers of one state (the live streams of a
 * database replaying one commit): when several principals look up the same rows, each
 * narrowed to its own (e.g. its own membership of a project), the rows are read once
 * (if there are at most `wideRows`) and indexed by the narrowing fields, so each asker's
 * answer is a map lookup instead of a statement.
 */
export interface Wide {
  /** Narrowed misses per (entity, field, value) so far; the rows once read (undefined: too many). */
  readonly entries: Map<string, { misses: number; rows?: ReadonlyArray<RecordValue> | undefined; read: boolean; readonly index: Map<string, Map<string, Array<RecordValue>>> }>
  /** The entry `peek` found last (see `wideEntry`). */
  last?: { readonly entity: string; readonly field: string; readonly value: Scalar; readonly entry: WideEntry }
}
export const makeWide = (): Wide => ({ entries: new Map() })
/** The most rows one shared read may return. */
const wideRows = 4096
/** Narrowed misses of the same rows before they are read once for all. */
const wideAfter = 8
const indexable = (v: unknown) => typeof v === "string" || typeof v === "number" || typeof v === "boolean"

/**
 * Row reads for one consistent state. `cache` may be shared by every reader of the same
 * state (the same database at the same last committed position), since a lookup's answer
 * depends on nothing else.
 */
export const rows = (
  catalog: Catalog,
  reader: SqlClient.SqlClient,
  cache: Map<string, ReadonlyArray<RecordValue>> = new Map(),
  narrowing: Narrowing = () => undefined,
  /** Shared with every reader of the same state, as `cache` is. */
  wide?: Wide
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
  const selectAtMost = (entity: string, field: string, value: Scalar, limit: number) => {
    const compiled = catalog.entity(entity)!
    return Effect.map(
      reader.unsafe<Record<string, unknown>>(`SELECT * FROM ${Layout.tableName(compiled)} WHERE ${Layout.quote(field)} = ? LIMIT ${limit}`, [bind(entity, field, value)]),
      (found) => found.map((row) => Layout.decodeRecord(compiled, row))
    )
  }
  const where: Rows["where"] = (entity, field, values) => select(entity, field, values, [])
  // Lookups skip rows no asker could accept (e.g. other subjects' memberships), so a
  // project with many members costs one row per principal, not one per member.
  const lookup: Rows["lookup"] = (entity, field, value) => {
    const also = narrowing(entity, field) ?? noAlso
    const keys = alsoKeys(also)
    const key = `${entity}\u0000${field}\u0000${norm(value)}\u0000${keys.norm}`
    const hit = cache.get(key)
    if (hit) return Effect.succeed(hit)
    const narrowed = Effect.tap(select(entity, field, [value], also), (found) => cache.set(key, found))
    if (wide === undefined || also.length === 0 || !keys.indexable) return narrowed
    const base = `${entity}\u0000${field}\u0000${norm(value)}`
    let shared = wide.entries.get(base)
    if (shared === undefined) wide.entries.set(base, (shared = { misses: 0, read: false, index: new Map() }))
    if (shared.read) return shared.rows === undefined ? narrowed : Effect.succeed(fromWide(shared, also, cache, key))
    shared.misses += 1
    if (shared.misses < wideAfter) return narrowed
    shared.read = true
    return Effect.flatMap(selectAtMost(entity, field, value, wideRows + 1), (all) => {
      if (all.length > wideRows) return narrowed
      shared!.rows = all
      return Effect.succeed(fromWide(shared!, also, cache, key))
    })
  }
  const every: Rows["every"] = (entity, field, value) =>
    Effect.map(selectAtMost(entity, field, value, wideRows + 1), (all) => (all.length > wideRows ? undefined : all))
  return { where, lookup, every }
}

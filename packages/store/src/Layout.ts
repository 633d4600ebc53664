/**
 * The stored layout of entity records: one STRICT, WITHOUT ROWID table per entity,
 * named after the entity, one column per field, `id` as the text primary key. Because
 * the tables are WITHOUT ROWID, every secondary index also carries `id`, so keyset
 * pages ordered by (field, id) are served from the index. Identifiers come only from
 * the compiled catalog (validated names), never from request text.
 */
import type { CompiledEntity, CompiledField, Catalog } from "@cairn/catalog/Catalog"

/** Quotes a catalog identifier. Names are validated at compile time; this is belt and braces. */
export const quote = (identifier: string): string => {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(identifier)) throw new Error(`not a catalog identifier: ${identifier}`)
  return `"${identifier}"`
}

export const tableName = (entity: CompiledEntity | string): string => quote(typeof entity === "string" ? entity : entity.name)

const sqlType = (field: CompiledField): string =>
  field.column === "text" ? "TEXT" : field.column === "real" ? "REAL" : "INTEGER"

const literal = (value: string | number | boolean): string =>
  typeof value === "string" ? `'${value.replace(/'/g, "''")}'` : typeof value === "boolean" ? (value ? "1" : "0") : String(value)

export const columnDefinition = (field: CompiledField): string => {
  const checks: Array<string> = []
  if (field.column === "boolean") checks.push(`${quote(field.name)} IN (0, 1)`)
  if (field.literals) checks.push(`${quote(field.name)} IN (${field.literals.map(literal).join(", ")})`)
  return [quote(field.name), sqlType(field), field.nullable ? "" : "NOT NULL", ...checks.map((c) => `CHECK (${c})`)]
    .filter((s) => s !== "")
    .join(" ")
}

/** DDL statements that create an entity's table and indexes (idempotent). */
export const entityDdl = (entity: CompiledEntity): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${tableName(entity)} (${[
    `"id" TEXT PRIMARY KEY NOT NULL`,
    ...entity.fields.map(columnDefinition)
  ].join(", ")}) STRICT, WITHOUT ROWID`,
  ...entity.indexes.map(
    (ix) => `CREATE INDEX IF NOT EXISTS ${quote(ix.name)} ON ${tableName(entity)} (${ix.fields.map(quote).join(", ")})`
  )
]

/** DDL for every entity of a catalog. */
export const catalogDdl = (catalog: Catalog): ReadonlyArray<string> => catalog.entities.flatMap(entityDdl)

/** A stored column value: what SQLite holds. */
export type Stored = string | number | null

/** Encodes one field value (already in its schema's encoded form) for storage. */
export const encodeValue = (field: CompiledField, value: unknown): Stored => {
  if (value === undefined || value === null) return null
  if (field.file) return JSON.stringify(value)
  if (field.column === "boolean") return value === true ? 1 : 0
  return value as string | number
}

/** Decodes one stored value into its plain JSON form. */
export const decodeValue = (field: CompiledField, value: unknown): unknown => {
  if (value === null || value === undefined) return null
  if (field.file) return JSON.parse(value as string) as unknown
  if (field.column === "boolean") return value === 1 || value === 1n || value === true
  if (typeof value === "bigint") return Number(value)
  return value as string | number
}

/** Encodes a whole record (`id` plus fields, encoded form) into column values. */
export const encodeRecord = (entity: CompiledEntity, record: Readonly<Record<string, unknown>>): Record<string, Stored> => {
  const row: Record<string, Stored> = { id: record["id"] as string }
  for (const field of entity.fields) row[field.name] = encodeValue(field, record[field.name])
  return row
}

/**
 * Decodes a stored row into the record's encoded form: optional fields that are NULL
 * are omitted, everything else is plain JSON.
 */
export const decodeRecord = (entity: CompiledEntity, row: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const record: Record<string, unknown> = { id: row["id"] }
  for (const field of entity.fields) {
    const value = decodeValue(field, row[field.name])
    if (value !== null || !field.nullable) record[field.name] = value
  }
  return record
}

/**
 * Reads one entity's part of a snapshot page: the records in the principal's scope
 * after a given id, in id order, within the page's record and byte budget.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Catalog } from "@cairn/catalog"
import type { SyncRecord } from "@cairn/domain"
import { inScopeEffect } from "@cairn/policy"
import { Layout } from "@cairn/store"
import { Effect } from "effect"
import type { Rows } from "./rows.js"
import { entryFilter, type ScopeEntry, strip } from "./scope.js"

export interface EntityPage {
  readonly records: ReadonlyArray<SyncRecord>
  readonly bytes: number
  /** The last id read; the next page of this entity starts after it. */
  readonly last: string | null
  /** No records of this entity remain after `last`. */
  readonly exhausted: boolean
}

export interface PageOptions {
  readonly catalog: Catalog
  readonly reader: SqlClient.SqlClient
  readonly rows: Rows
  readonly entry: ScopeEntry
  readonly after: string | null
  readonly maxRecords: number
  readonly maxBytes: number
  /** Rows examined at most, so one page's work stays bounded however selective the scope. */
  readonly maxExamined: number
}

export const readPage = (options: PageOptions): Effect.Effect<EntityPage, SqlError.SqlError> =>
  Effect.gen(function* () {
    const { entry, reader } = options
    const filter = entryFilter(entry)
    if (filter._tag === "None") return { records: [], bytes: 0, last: options.after, exhausted: true }
    const records: Array<SyncRecord> = []
    let bytes = 0
    let last = options.after
    let examined = 0
    const chunk = Math.min(Math.max(options.maxRecords, 64), 2000)
    const table = Layout.tableName(entry.entity)
    for (;;) {
      const found = yield* reader.unsafe<Record<string, unknown>>(
        last === null
          ? `SELECT * FROM ${table} ORDER BY "id" LIMIT ?`
          : `SELECT * FROM ${table} WHERE "id" > ? ORDER BY "id" LIMIT ?`,
        last === null ? [chunk] : [last, chunk]
      )
      for (const row of found) {
        const record = Layout.decodeRecord(entry.entity, row)
        examined += 1
        if (yield* inScopeEffect(options.catalog, entry.entity.name, filter, record, options.rows.lookup)) {
          const visible = strip(entry, record)
          const size = JSON.stringify(visible).length + entry.entity.name.length + 32
          if (records.length > 0 && (records.length >= options.maxRecords || bytes + size > options.maxBytes)) {
            return { records, bytes, last, exhausted: false }
          }
          records.push({ entity: entry.entity.name, id: record["id"] as string, record: visible })
          bytes += size
        }
        last = record["id"] as string
        if (examined >= options.maxExamined && records.length > 0) return { records, bytes, last, exhausted: false }
      }
      if (found.length < chunk) return { records, bytes, last, exhausted: true }
      if (examined >= options.maxExamined) return { records, bytes, last, exhausted: false }
    }
  })

/**
 * Reads one entity's part of a snapshot page: the records in the principal's scope
 * (row scope and the client's filter, compiled to SQL by the query package) after a
 * given id, in id order, within the page's record and byte budget.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Catalog } from "@cairn/catalog/Catalog"
import type { SyncRecord } from "@cairn/domain/Sync"
import { scopeFilterSql } from "@cairn/query/ScopeSql"
import { Layout } from "@cairn/store"
import { Effect } from "effect"
import { entryFilter, type ScopeEntry, strip } from "./scope.js"

export interface EntityPage {
  readonly records: ReadonlyArray<SyncRecord>
  readonly bytes: number
  /** The last id sent; the next page of this entity starts after it. */
  readonly last: string | null
  /** No records of this entity remain after `last`. */
  readonly exhausted: boolean
}

export interface PageOptions {
  readonly catalog: Catalog
  readonly reader: SqlClient.SqlClient
  readonly entry: ScopeEntry
  readonly after: string | null
  readonly maxRecords: number
  readonly maxBytes: number
}

export const readPage = (options: PageOptions): Effect.Effect<EntityPage, SqlError.SqlError> =>
  Effect.gen(function* () {
    const { entry } = options
    const filter = entryFilter(entry)
    if (filter._tag === "None") return { records: [], bytes: 0, last: options.after, exhausted: true }
    const condition =
      filter._tag === "All" ? { text: "1", params: [] } : scopeFilterSql(options.catalog, entry.entity.name, filter.filter, "r")
    const found = yield* options.reader.unsafe<Record<string, unknown>>(
      `SELECT "r".* FROM ${Layout.tableName(entry.entity)} AS "r" WHERE ${condition.text}${
        options.after === null ? "" : ` AND "r"."id" > ?`
      } ORDER BY "r"."id" LIMIT ?`,
      [...condition.params, ...(options.after === null ? [] : [options.after]), options.maxRecords]
    )
    const records: Array<SyncRecord> = []
    let bytes = 0
    for (const row of found) {
      const visible = strip(entry, Layout.decodeRecord(entry.entity, row))
      const size = JSON.stringify(visible).length + entry.entity.name.length + 32
      // A page always makes progress: its first record goes in whatever its size.
      if (records.length > 0 && bytes + size > options.maxBytes) {
        return { records, bytes, last: records[records.length - 1]!.id, exhausted: false }
      }
      records.push({ entity: entry.entity.name, id: visible["id"] as string, record: visible })
      bytes += size
    }
    return {
      records,
      bytes,
      last: records.length > 0 ? records[records.length - 1]!.id : options.after,
      exhausted: found.length < options.maxRecords
    }
  })

/**
 * Reads one entity's part of a snapshot page: the records in the principal's scope
 * (row scope and the client's filter, compiled to SQL by the query package) after a
 * given id, in id order, within the page's record and byte budget and its work budget:
 * at most `maxExamined` rows of the table are examined (a window of the next ids, then
 * filtered), so a filter few rows match never scans the whole table in one request; the
 * part then ends after the last id examined, with fewer records (maybe none).
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
  /** The last id sent or examined; the next page of this entity starts after it. */
  readonly last: string | null
  /** Rows of the table examined for this part (its work). */
  readonly examined: number
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
  /** Most rows of the table this part may examine (at least 1). */
  readonly maxExamined: number
}

export const readPage = (options: PageOptions): Effect.Effect<EntityPage, SqlError.SqlError> =>
  Effect.gen(function* () {
    const { entry } = options
    const filter = entryFilter(entry)
    if (filter._tag === "None") return { records: [], bytes: 0, last: options.after, exhausted: true, examined: 0 }
    const table = Layout.tableName(entry.entity)
    const seek = options.after === null ? "" : ` WHERE "id" > ?`
    const seekParams = options.after === null ? [] : [options.after]
    // Without a filter every row examined is sent: the window is the page itself.
    const window = filter._tag === "All" ? Math.min(options.maxRecords, options.maxExamined) : Math.max(1, options.maxExamined)
    const condition =
      filter._tag === "All" ? { text: "1", params: [] } : scopeFilterSql(options.catalog, entry.entity.name, filter.filter, "r")
    const found = yield* options.reader.unsafe<Record<string, unknown>>(
      `SELECT "r".* FROM (SELECT * FROM ${table}${seek} ORDER BY "id" LIMIT ?) AS "r" WHERE ${condition.text} ORDER BY "r"."id" LIMIT ?`,
      [...seekParams, window, ...condition.params, options.maxRecords]
    )
    const records: Array<SyncRecord> = []
    let bytes = 0
    for (const row of found) {
      const visible = strip(entry, Layout.decodeRecord(entry.entity, row))
      const size = JSON.stringify(visible).length + entry.entity.name.length + 32
      // A page always makes progress: its first record goes in whatever its size.
      if (records.length > 0 && bytes + size > options.maxBytes) {
        return { records, bytes, last: records[records.length - 1]!.id, exhausted: false, examined: window }
      }
      records.push({ entity: entry.entity.name, id: visible["id"] as string, record: visible })
      bytes += size
    }
    if (found.length >= options.maxRecords) {
      return { records, bytes, last: records[records.length - 1]!.id, exhausted: false, examined: window }
    }
    // Fewer records than asked: either the window reached the table's end, or the work budget
    // ran out first; then the part ends after the window's last id (an index-only read).
    const edge = yield* options.reader.unsafe<{ readonly n: number; readonly last: string | null }>(
      `SELECT count(*) AS n, max("id") AS last FROM (SELECT "id" FROM ${table}${seek} ORDER BY "id" LIMIT ?)`,
      [...seekParams, window]
    )
    const examined = Number(edge[0]?.n ?? 0)
    const windowEnd = edge[0]?.last ?? undefined
    if (examined < window || windowEnd === undefined) {
      return { records, bytes, last: records.length > 0 ? records[records.length - 1]!.id : options.after, exhausted: true, examined }
    }
    return { records, bytes, last: windowEnd, exhausted: false, examined }
  })

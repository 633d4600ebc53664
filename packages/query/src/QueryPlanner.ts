/**
 * The query engine every transport calls: validates one QueryDocumentV1 against the
 * principal's visible catalog, plans it to one bounded SQL statement with the row
 * scope ANDed in, runs it, and answers plain JSON rows, a sealed continuation cursor
 * and the basis (catalog token and commit position) the page was read at.
 */
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { File, ValueOrder } from "@cairn/catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { CatalogChanged, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type Principal } from "@cairn/domain/Principal"
import { type QueryRequest, type QueryResult, type Row } from "@cairn/domain/Query"
import { Layout, Position } from "@cairn/store"
import * as Cursor from "./internal/cursor.js"
import { type FieldInfo, isError, isIdField, plan } from "./internal/plan.js"
import type { Bindable } from "./internal/sql.js"
import { pageStatement } from "./internal/statement.js"
import { QueryLimits } from "./QueryLimits.js"

export interface QueryInput {
  readonly view: View
  readonly principal: Principal
  /** The caller's database, derived from their verified identity. */
  readonly database: {
    readonly id: string
    readonly sql: SqlClient
    /** The database's fast path for one statement's rows as value arrays (see `Database.values`), when it has one. */
    readonly values?: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>>
  }
  readonly request: QueryRequest
}

const decode = (field: FieldInfo, value: unknown): unknown => {
  if (isIdField(field)) return value
  const decoded = Layout.decodeValue(field, value)
  // A file answers with its metadata and the gated path to download it.
  return field.file && decoded !== null
    ? { ...(decoded as File.FileRef), url: File.downloadPath((decoded as File.FileRef).objectId) }
    : decoded
}

export class QueryPlanner extends Effect.Service<QueryPlanner>()("@cairn/query/QueryPlanner", {
  effect: Effect.gen(function* () {
    const sealer = yield* Sealer

    // A span without a captured stack: every query passes here.
    const run = (input: QueryInput) => Effect.withSpan(runBody(input), "QueryPlanner.run", { captureStackTrace: false })

    const runBody = Effect.fnUntraced(function* (input: QueryInput) {
      const { database, principal, request, view } = input
      // `request.ifCatalog` was checked by the engine (`DataPlane`) before the database was opened.
      const limits = yield* QueryLimits
      const planned = plan(view, request.query, limits)
      if (isError(planned)) return yield* planned
      const binding: Cursor.CursorBinding = {
        catalogToken: view.token,
        admits: (token) => view.admits(token, CatalogVersion.touchedByQuery(view.catalog, request.query)),
        principal,
        database: database.id,
        fingerprint: planned.fingerprint
      }
      const after = request.query.page?.after
      const cursor = after === undefined ? undefined : yield* Cursor.open(sealer, after, binding, planned.order.length)
      const statement = pageStatement(view, planned, cursor, limits.maxRowsExamined)
      const result = database.values
        ? yield* database.values(statement.sql.text, statement.sql.params)
        : yield* database.sql.unsafe(statement.sql.text, statement.sql.params).values.pipe(Effect.orDie)

      let position = 0
      let exhausted = false
      const keys: Array<ReadonlyArray<Bindable>> = []
      const page: Array<ReadonlyArray<unknown>> = []
      const idColumn = statement.keyColumns[statement.keyColumns.length - 1]!
      for (const row of result) {
        const id = row[idColumn]
        if (typeof id === "string") {
          keys.push(statement.keyColumns.map((c) => { const v = row[c]; return (typeof v === "bigint" ? Number(v) : v) as Bindable }))
          page.push(row)
        } else if (id === null || id === undefined) exhausted = true
        else position = Number(id)
      }
      const more = keys.length > planned.first
      // A sorted page is wrong if its candidates were cut off; an ordered page only if it came up short.
      if (exhausted && (planned.access._tag === "Sorted" || !more)) {
        return yield* new QueryBudgetExceeded({
          limit: "maxRowsExamined",
          message:
            planned.access._tag === "Sorted"
              ? `Ordering this query means sorting more than ${limits.maxRowsExamined} candidate rows of ${planned.entity.name}. Add "eq" filters on indexed fields (describe marks them) so fewer rows are candidates, or order by an indexed field.`
              : `Filling this page means examining more than ${limits.maxRowsExamined} rows of ${planned.entity.name}, because few of them match the filter. Add an "eq" filter on an indexed field (describe marks them), or narrow the filter.`
        })
      }
      if (planned.access._tag === "Ordered") {
        // The walk's order is the page's order; check it rather than trust it, since a
        // wrong order would silently skip or repeat rows across pages.
        const descending = planned.order.map((o) => o.direction === "desc")
        const sequence = cursor === undefined ? keys : [cursor, ...keys]
        for (let i = 1; i < sequence.length; i++) {
          if (ValueOrder.compareKeys(sequence[i - 1]!, sequence[i]!, descending) >= 0) {
            return yield* Effect.dieMessage("QueryPlanner: an ordered walk returned rows out of order")
          }
        }
      }
      const rows: Array<Row> = page.slice(0, planned.first).map((row) =>
        Object.fromEntries(planned.select.map((s, i) => [s.name, decode(s.resolved.field, row[statement.selectColumns[i]!])]))
      )
      const answer: QueryResult = {
        rows,
        ...(more ? { cursor: Cursor.seal(sealer, binding, keys[planned.first - 1]!) } : {}),
        basis: { catalogToken: view.token, position: Position.encode(position) }
      }
      return answer
    })

    return { run } as const
  })
}) {}

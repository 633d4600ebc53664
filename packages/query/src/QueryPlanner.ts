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
import { digest } from "@cairn/catalog/Digest"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type Principal } from "@cairn/domain/Principal"
import { hotSpan } from "@cairn/domain/HotSpan"
import { type QueryRequest, type QueryResult, type Row } from "@cairn/domain/Query"
import { Layout, Position } from "@cairn/store"
import * as Cursor from "./internal/cursor.js"
import * as PlanCache from "./internal/planCache.js"
import { rowBuilder } from "./internal/rows.js"
import { type FieldInfo, isError, isIdField, type Plan, plan } from "./internal/plan.js"
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

/** Most plans kept per planner (one per document shape and policy class). */
const PLAN_CACHE_CAPACITY = 4096

const stored = (v: unknown): Bindable => (typeof v === "bigint" ? Number(v) : v) as Bindable

/** A page row's sort key, as a cursor holds it. */
const keyOf = (row: ReadonlyArray<unknown>, keyColumns: ReadonlyArray<number>): Array<Bindable> => {
  const key = new Array<Bindable>(keyColumns.length)
  for (let c = 0; c < keyColumns.length; c++) key[c] = stored(row[keyColumns[c]!])
  return key
}

/**
 * Whether `row` sorts strictly after `before` (a cursor's key, or a row read through
 * `beforeColumns`): `ValueOrder.compareKeys` without building the keys.
 */
const follows = (
  before: ReadonlyArray<unknown>,
  beforeColumns: ReadonlyArray<number> | undefined,
  row: ReadonlyArray<unknown>,
  keyColumns: ReadonlyArray<number>,
  descending: ReadonlyArray<boolean>
): boolean => {
  for (let i = 0; i < keyColumns.length; i++) {
    const c = ValueOrder.compare(stored(beforeColumns === undefined ? before[i] : before[beforeColumns[i]!]), stored(row[keyColumns[i]!]))
    if (c !== 0) return (descending[i] ? -c : c) < 0
  }
  return false
}

/** Which terms of the plan's order are descending, per plan. */
const descendings = new WeakMap<Plan["order"], ReadonlyArray<boolean>>()
const descendingOf = (planned: Plan): ReadonlyArray<boolean> => {
  let found = descendings.get(planned.order)
  if (found === undefined) descendings.set(planned.order, (found = planned.order.map((o) => o.direction === "desc")))
  return found
}

/** How each selection's stored value becomes the caller's, per plan: one closure per field kind. */
const decoders = new WeakMap<Plan["select"], ReadonlyArray<(value: unknown) => unknown>>()

const decoderOf = (field: FieldInfo): ((value: unknown) => unknown) => {
  if (isIdField(field)) return (value) => value
  if (field.file || field.column === "boolean") return (value) => decode(field, value)
  // What `Layout.decodeValue` does for the other columns.
  return (value) => (value === null || value === undefined ? null : typeof value === "bigint" ? Number(value) : value)
}

/** The page's rows as the caller sees them: each selection under its name, decoded. */
const shapeRows = (planned: Plan, page: ReadonlyArray<ReadonlyArray<unknown>>, selectColumns: ReadonlyArray<number>): Array<Row> => {
  const count = Math.min(page.length, planned.first)
  const select = planned.select
  let decode = decoders.get(select)
  if (decode === undefined) decoders.set(select, (decode = select.map((s) => decoderOf(s.resolved.field))))
  const build = rowBuilder(select.map((s) => s.name), decode, selectColumns)
  const rows = new Array<Row>(count)
  for (let r = 0; r < count; r++) rows[r] = build(page[r]!)
  return rows
}

export class QueryPlanner extends Effect.Service<QueryPlanner>()("@cairn/query/QueryPlanner", {
  effect: Effect.gen(function* () {
    const sealer = yield* Sealer

    // Every query passes here: a span only for a configured tracer (a span costs more than planning).
    const run = (input: QueryInput) => hotSpan("QueryPlanner.run")(runBody(input))

    /** Plans by document shape and policy class (see `planCache`), bounded. */
    const cache = new PlanCache.Lru<PlanCache.Entry>(PLAN_CACHE_CAPACITY)

    const runBody = Effect.fnUntraced(function* (input: QueryInput) {
      const { database, principal, request, view } = input
      const document = request.query
      // `request.ifCatalog` was checked by the engine (`DataPlane`) before the database was opened.
      const limits = yield* QueryLimits
      const cls = PlanCache.classOf(view)
      const shape = cls === undefined ? undefined : PlanCache.shapeOf(document, limits.maxFilterNodes)
      const key = shape === undefined ? undefined : `${cls!.id} ${shape.key}`
      let entry = key === undefined ? undefined : cache.get(key)
      if (entry !== undefined && !(entry.limits === limits && entry.catalog === view.catalog && PlanCache.valuesFit(entry, shape!))) {
        entry = undefined
      }
      let planned: Plan
      if (entry !== undefined) planned = entry.plan
      else {
        const fresh = plan(view, document, limits)
        if (isError(fresh)) return yield* fresh
        planned = fresh
        if (key !== undefined) {
          entry = PlanCache.makeEntry(view, cls!, document, fresh, limits)
          cache.set(key, entry)
        }
      }
      const catalogToken = cls === undefined ? view.token : cls.token
      const cached = entry
      const binding: Cursor.CursorBinding = {
        catalogToken,
        admits: (token) => view.admits(token, CatalogVersion.touchedByQuery(view.catalog, document)),
        principal,
        database: database.id,
        fingerprint: cached === undefined ? planned.fingerprint : () => digest(PlanCache.fingerprintJson(cached, document))
      }
      const after = document.page?.after
      const cursor = after === undefined ? undefined : yield* Cursor.open(sealer, after, binding, planned.order.length)
      let text: string
      let params: ReadonlyArray<unknown>
      let keyColumns: ReadonlyArray<number>
      let selectColumns: ReadonlyArray<number>
      if (entry !== undefined) {
        const statement = PlanCache.compiled(entry, PlanCache.cursorShape(cursor))
        text = statement.text
        params = PlanCache.bind(statement, shape!.values, cls!.values, cursor)
        keyColumns = statement.keyColumns
        selectColumns = statement.selectColumns
      } else {
        const statement = pageStatement(view, planned, cursor, limits.maxRowsExamined)
        text = statement.sql.text
        params = statement.sql.params
        keyColumns = statement.keyColumns
        selectColumns = statement.selectColumns
      }
      const result = database.values
        ? yield* database.values(text, params)
        : yield* database.sql.unsafe(text, params as Array<Bindable>).values.pipe(Effect.orDie)

      let position = 0
      let exhausted = false
      const page: Array<ReadonlyArray<unknown>> = []
      const keyCount = keyColumns.length
      const idColumn = keyColumns[keyCount - 1]!
      for (const row of result) {
        const id = row[idColumn]
        if (typeof id === "string") page.push(row)
        else if (id === null || id === undefined) exhausted = true
        else position = Number(id)
      }
      const more = page.length > planned.first
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
        const descending = descendingOf(planned)
        for (let r = cursor === undefined ? 1 : 0; r < page.length; r++) {
          if (!follows(r === 0 ? cursor! : page[r - 1]!, r === 0 ? undefined : keyColumns, page[r]!, keyColumns, descending)) {
            return yield* Effect.dieMessage("QueryPlanner: an ordered walk returned rows out of order")
          }
        }
      }
      const rows = shapeRows(planned, page, selectColumns)
      const answer: QueryResult = {
        rows,
        ...(more ? { cursor: Cursor.seal(sealer, binding, keyOf(page[planned.first - 1]!, keyColumns)) } : {}),
        basis: { catalogToken, position: Position.encode(position) }
      }
      return answer
    })

    return {
      run,
      /** How many plans the cache holds: for tests and diagnostics. */
      cachedPlans: () => cache.size
    } as const
  })
}) {}

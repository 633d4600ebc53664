// Shared fixtures: a temp SQLite file with the tracker's tables and a commit log,
// direct seeding through the stored layout, and an in-memory reference evaluator
// (the policy package's evaluator for filters and scopes, SQLite's order of values)
// that the planner's pages are checked against.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { type QueryDocumentV1, type Scalar } from "@cairn/domain/QueryDocument"
import { evaluate, inScope, type Lookup, type RecordValue } from "@cairn/policy/Evaluate"
import { Layout } from "@cairn/store"
import { tracker } from "@cairn/testkit/fixture/tracker"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"

export const catalog: Catalog = Effect.runSync(compile(tracker))

export const Keys = Sealer.layer(Redacted.make("query-test-secret"))

/** A fresh database file in a temp dir with the tracker's tables and `_cairn_commits`. */
export const DatabaseLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-query-"))),
      (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
    )
    return SqliteClient.layer({ filename: join(dir, "db.sqlite") })
  })
)

export const setupSchema = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const ddl of Layout.catalogDdl(catalog)) yield* sql.unsafe(ddl)
  yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "_cairn_commits" ("position" INTEGER PRIMARY KEY)`)
})

export const TestLive = Layer.mergeAll(
  Layer.effectDiscard(setupSchema).pipe(Layer.provideMerge(DatabaseLive)),
  QueryPlanner.Default.pipe(Layer.provideMerge(Keys)),
  QueryLimits.layer()
)

export const who = (subject: string, databaseKey = "acme") =>
  new Principal({ subject, roles: [], scopes: [], claims: { sub: subject }, databaseKey: DatabaseKey.make(databaseKey) })

export type Data = Record<string, ReadonlyArray<RecordValue>>

export const insert = (entity: string, records: ReadonlyArray<RecordValue>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const compiled = catalog.entity(entity)!
    const columns = ["id", ...compiled.fields.map((f) => f.name)]
    const text = `INSERT INTO ${Layout.tableName(compiled)} (${columns.map(Layout.quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`
    for (const record of records) {
      const row = Layout.encodeRecord(compiled, record)
      yield* sql.unsafe(text, columns.map((c) => row[c] ?? null))
    }
  })

export const clear = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  for (const e of catalog.entities) yield* sql.unsafe(`DELETE FROM ${Layout.tableName(e)}`)
  yield* sql.unsafe(`DELETE FROM "_cairn_commits"`)
})

export const commit = (position: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`INSERT INTO "_cairn_commits" ("position") VALUES (?)`, [position]))

// ---------------------------------------------------------------------------------
// The reference evaluator.

type Stored = string | number | null

const normalize = (v: unknown): Stored =>
  v === undefined || v === null ? null : typeof v === "boolean" ? (v ? 1 : 0) : (v as string | number)

/** SQLite's order: NULL, numbers, then text by UTF-8 bytes. */
export const compareStored = (a: Stored, b: Stored): number => {
  if (a === b) return 0
  if (a === null) return -1
  if (b === null) return 1
  if (typeof a === "number" && typeof b === "number") return a < b ? -1 : 1
  if (typeof a === "number") return -1
  if (typeof b === "number") return 1
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))
}

export interface Reference {
  /** Every matching row, in page order: output object and sort key. */
  readonly rows: ReadonlyArray<{ readonly output: Record<string, unknown>; readonly key: ReadonlyArray<Stored> }>
  readonly compareKeys: (a: ReadonlyArray<Stored>, b: ReadonlyArray<Stored>) => number
  readonly keyOf: (record: RecordValue) => ReadonlyArray<Stored>
  readonly matches: (record: RecordValue) => boolean
}

export const reference = (view: View, data: Data, doc: QueryDocumentV1): Reference => {
  const all: Lookup = (entity, field, value) => (data[entity] ?? []).filter((r) => normalize(r[field]) === normalize(value))
  const visible = (entity: string, record: RecordValue) => inScope(catalog, entity, view.rowScope(entity), record, all)
  const seen: Lookup = (entity, field, value) => all(entity, field, value).filter((r) => visible(entity, r))
  const entity = doc.from.name
  const valueAt = (record: RecordValue, path: ReadonlyArray<string>): unknown => {
    let current: RecordValue | undefined = record
    let owner = entity
    for (const hop of path.slice(0, -1)) {
      const rel = catalog.entity(owner)!.relationship(hop)!
      const id: unknown = current[rel.via]
      current = typeof id === "string" ? seen(rel.target, "id", id as Scalar)[0] : undefined
      if (current === undefined) return null
      owner = rel.target
    }
    return current[path[path.length - 1]!] ?? null
  }
  const terms: Array<{ path: ReadonlyArray<string>; direction: "asc" | "desc" }> = []
  for (const t of doc.order ?? []) {
    terms.push(t)
    if (t.path.length === 1 && t.path[0] === "id") break
  }
  if (terms.length === 0 || terms[terms.length - 1]!.path.join(".") !== "id") {
    terms.push({ path: ["id"], direction: terms[terms.length - 1]?.direction ?? "asc" })
  }
  const keyOf = (r: RecordValue) => terms.map((t) => normalize(valueAt(r, t.path)))
  const compareKeys = (a: ReadonlyArray<Stored>, b: ReadonlyArray<Stored>) => {
    for (let i = 0; i < terms.length; i++) {
      const c = compareStored(a[i]!, b[i]!)
      if (c !== 0) return terms[i]!.direction === "asc" ? c : -c
    }
    return 0
  }
  const matches = (r: RecordValue) =>
    visible(entity, r) && (doc.where === undefined || evaluate(catalog, entity, doc.where, r, seen))
  const rows = (data[entity] ?? [])
    .filter(matches)
    .map((r) => ({
      output: Object.fromEntries(Object.entries(doc.select).map(([name, s]) => [name, valueAt(r, s.path)])),
      key: keyOf(r)
    }))
    .sort((a, b) => compareKeys(a.key, b.key))
  return { rows, compareKeys, keyOf, matches }
}

export const fullView = View.full(catalog)

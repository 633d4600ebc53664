/**
 * Installs the compiled catalog into a database file, or validates it against the
 * installed one before any data is touched, by the change plan (`ChangePlan`): additive
 * changes are applied, changes that need validation are accepted when a scan finds no
 * stored row violating them, and incompatible changes (which would reinterpret stored
 * rows) are refused unless a declared migration covers them. `cairn check` and startup
 * compute the same plan first, so a refusal here is a backstop, not a per-request surprise.
 */
import { type SqlClient, type SqlError, SqlSchema } from "@effect/sql"
import { Data, Effect, Option, Schema } from "effect"
import { canonicalJson } from "@cairn/catalog/Digest"
import { type Catalog } from "@cairn/catalog/Catalog"
import * as ChangePlan from "./ChangePlan.js"
import * as Layout from "./Layout.js"
import { ddl, installTable } from "./Log.js"

/** Operator-facing: the deployment's catalog cannot be installed over this database. */
export class IncompatibleCatalog extends Data.TaggedError("IncompatibleCatalog")<{
  readonly databaseId: string
  readonly problems: ReadonlyArray<string>
}> {
  override get message(): string {
    return `The catalog is incompatible with the data of database ${this.databaseId}; nothing was changed. An explicit migration is needed:\n- ${this.problems.join("\n- ")}`
  }
}

export { Representation, representationOf } from "./ChangePlan.js"

/** The install record; `representation` stays text, compared as written before it is decoded. */
const InstallRow = Schema.Struct({
  root: Schema.String,
  catalog_token: Schema.String,
  representation: Schema.String,
  install_id: Schema.NullOr(Schema.String)
})

/** The install record of a database file, if it has one (read on any connection). */
export const readRecord = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const tables = yield* sql<{ readonly n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ${installTable}`
    if (Number(tables[0]?.n ?? 0) === 0) return Option.none<{ readonly root: string; readonly representation: ChangePlan.Representation }>()
    const found = yield* SqlSchema.findOne({
      Request: Schema.Void,
      Result: Schema.Struct({ root: Schema.String, representation: Schema.String }),
      execute: () => sql`SELECT root, representation FROM ${sql(installTable)} WHERE id = 1`
    })(undefined)
    if (Option.isNone(found)) return Option.none()
    return Option.some({ root: found.value.root, representation: yield* ChangePlan.decodeRepresentation(found.value.representation) })
  })

/** The declared migrations as the plan sees them: what each covers. */
export const coverageOf = (catalog: Catalog): ReadonlyArray<ChangePlan.Coverage> =>
  catalog.migrations.map((m) => ({ migration: m.name, covers: m.covers, convert: m.convert ?? {}, discards: m.discards ?? [] }))

/**
 * The plan of `catalog` over one database's install record: every change with its verdict.
 * A different root schema is one refused change.
 */
export const planFor = (
  sql: SqlClient.SqlClient,
  record: { readonly root: string; readonly representation: ChangePlan.Representation },
  catalog: Catalog
): Effect.Effect<ReadonlyArray<ChangePlan.PlannedChange>, SqlError.SqlError> =>
  record.root !== catalog.name
    ? Effect.succeed([
        {
          kind: "incompatible" as const,
          entity: "*",
          summary: `the database holds root schema "${record.root}", the deployment serves "${catalog.name}"`,
          refused: true
        }
      ])
    : ChangePlan.judge(sql, record.representation, catalog, coverageOf(catalog))

/** The lines of an `IncompatibleCatalog` for the refused changes of a plan. */
export const problemsOf = (plan: ReadonlyArray<ChangePlan.PlannedChange>): ReadonlyArray<string> =>
  plan.filter((c) => c.refused).map((c) => (c.entity === "*" ? c.summary : ChangePlan.describeChange(c)))

/** The install id stored in a database file; `None` when it has no install record (or one from before install ids). */
export const installIdOf = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const tables = yield* sql<{ readonly n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ${installTable}`
    if (Number(tables[0]?.n ?? 0) === 0) return Option.none<string>()
    if (!(yield* hasInstallId(sql))) return Option.none<string>()
    const found = yield* SqlSchema.findOne({
      Request: Schema.Void,
      Result: Schema.Struct({ install_id: Schema.NullOr(Schema.String) }),
      execute: () => sql`SELECT install_id FROM ${sql(installTable)} WHERE id = 1`
    })(undefined)
    return Option.flatMap(found, (row) => Option.fromNullable(row.install_id))
  })

const hasInstallId = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly n: number }>`SELECT count(*) AS n FROM pragma_table_info(${installTable}) WHERE name = 'install_id'`,
    (rows) => Number(rows[0]?.n ?? 0) > 0
  )

/**
 * Creates the internal tables and installs or validates the catalog in one
 * transaction on the write connection. Fails with `IncompatibleCatalog` (rolled back,
 * nothing changed) when the catalog would reinterpret stored data. A new file, or one
 * from before install ids, gets `installId`; answers the install id the file holds.
 */
export const install = (sql: SqlClient.SqlClient, catalog: Catalog, databaseId: string, now: string, installId: string) =>
  sql.withTransaction(
    Effect.gen(function* () {
      for (const statement of ddl) yield* sql.unsafe(statement)
      if (!(yield* hasInstallId(sql))) yield* sql.unsafe(`ALTER TABLE ${installTable} ADD COLUMN install_id TEXT`)
      const found = yield* SqlSchema.findOne({
        Request: Schema.Void,
        Result: InstallRow,
        execute: () => sql`SELECT root, catalog_token, representation, install_id FROM ${sql(installTable)} WHERE id = 1`
      })(undefined)
      if (found._tag === "None") {
        const representation = ChangePlan.representationOf(catalog, catalog.migrations.map((m) => m.name))
        for (const statement of Layout.catalogDdl(catalog)) yield* sql.unsafe(statement)
        yield* sql.unsafe(
          `INSERT INTO ${installTable} (id, root, catalog_token, fingerprint, representation, installed_at, updated_at, install_id) VALUES (1, ?, ?, ?, ?, ?, ?, ?)`,
          [catalog.name, catalog.token, catalog.fingerprint, canonicalJson(representation), now, now, installId]
        )
        return { outcome: "installed" as const, installId }
      }
      const current = found.value
      const held = current.install_id ?? installId
      if (current.install_id === null) yield* sql.unsafe(`UPDATE ${installTable} SET install_id = ? WHERE id = 1`, [installId])
      const installed = yield* ChangePlan.decodeRepresentation(current.representation)
      const applied = installed.migrations ?? []
      const representation = ChangePlan.representationOf(catalog, applied)
      if (current.representation === canonicalJson(representation) && current.root === catalog.name) {
        if (current.catalog_token === catalog.token) return { outcome: "unchanged" as const, installId: held }
      } else {
        const plan = yield* planFor(sql, { root: current.root, representation: installed }, catalog)
        const problems = problemsOf(plan)
        if (problems.length > 0) return yield* new IncompatibleCatalog({ databaseId, problems })
        // Converted values are computed from the old columns before the tables are rebuilt, written after.
        // Converted values are computed from the old columns before the tables are rebuilt, and read by the
        // rebuild from a temp table (a required field is filled as its row is copied).
        const converted = [...(yield* ChangePlan.conversions(sql, installed, catalog, plan, coverageOf(catalog))).values()]
        const table = `temp.${ChangePlan.convertedTable}`
        if (converted.length > 0) {
          yield* sql.unsafe(`CREATE TEMP TABLE IF NOT EXISTS ${ChangePlan.convertedTable} ("entity" TEXT NOT NULL, "field" TEXT NOT NULL, "id" TEXT NOT NULL, "v", PRIMARY KEY ("entity", "field", "id"))`)
          yield* sql.unsafe(`DELETE FROM ${table}`)
          for (const conversion of converted) {
            for (const [id, value] of conversion.values) {
              yield* sql.unsafe(`INSERT INTO ${table} ("entity", "field", "id", "v") VALUES (?, ?, ?, ?)`, [conversion.change.entity, conversion.field.name, id, value])
            }
          }
        }
        const names = converted.map((c) => `${c.change.entity}.${c.field.name}`)
        for (const statement of ChangePlan.statements(installed, catalog, names)) yield* sql.unsafe(statement)
        if (converted.length > 0) yield* sql.unsafe(`DROP TABLE ${table}`)
        // A migration that only covers changes (no step) is applied by installing its catalog.
        const coveredOnly = catalog.migrations.filter((m) => m.step === undefined && !applied.includes(m.name)).map((m) => m.name)
        const updated = ChangePlan.representationOf(catalog, [...applied, ...coveredOnly])
        yield* sql.unsafe(
          `UPDATE ${installTable} SET catalog_token = ?, fingerprint = ?, representation = ?, updated_at = ? WHERE id = 1`,
          [catalog.token, catalog.fingerprint, canonicalJson(updated), now]
        )
        return { outcome: "updated" as const, installId: held }
      }
      yield* sql.unsafe(
        `UPDATE ${installTable} SET catalog_token = ?, fingerprint = ?, representation = ?, updated_at = ? WHERE id = 1`,
        [catalog.token, catalog.fingerprint, canonicalJson(representation), now]
      )
      return { outcome: "updated" as const, installId: held }
    })
  )

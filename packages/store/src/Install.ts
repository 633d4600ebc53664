/**
 * Installs the compiled catalog into a database file, or validates it against the
 * installed one before any data is touched. Additive changes (a new entity, a new
 * nullable field, a new or dropped index) are applied; anything that would
 * reinterpret stored rows (a removed entity or field, a changed column type,
 * nullability or set of allowed values, a new required field) fails activation and
 * needs an explicit migration.
 */
import { type SqlClient, SqlSchema } from "@effect/sql"
import { Data, Effect, Option, Schema } from "effect"
import { canonicalJson } from "@cairn/catalog/Digest"
import { type Catalog } from "@cairn/catalog/Catalog"
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

const StoredField = Schema.Struct({
  name: Schema.String,
  column: Schema.String,
  nullable: Schema.Boolean,
  literals: Schema.optional(Schema.Array(Schema.Union(Schema.String, Schema.Number, Schema.Boolean)))
})
const StoredEntity = Schema.Struct({
  name: Schema.String,
  fields: Schema.Array(StoredField),
  indexes: Schema.Array(Schema.Struct({ name: Schema.String, fields: Schema.Array(Schema.String) }))
})
/** What the file's tables mean: enough to judge whether a catalog reinterprets them. */
export const Representation = Schema.Struct({ entities: Schema.Array(StoredEntity) })
export type Representation = typeof Representation.Type

/** The install record; `representation` stays text, compared as written before it is decoded. */
const InstallRow = Schema.Struct({
  root: Schema.String,
  catalog_token: Schema.String,
  representation: Schema.String,
  install_id: Schema.NullOr(Schema.String)
})
const decodeRepresentation = Schema.decodeUnknown(Schema.parseJson(Representation))

export const representationOf = (catalog: Catalog): Representation => ({
  entities: catalog.entities.map((e) => ({
    name: e.name,
    fields: e.fields.map((f) => ({
      name: f.name,
      column: f.column,
      nullable: f.nullable,
      ...(f.literals ? { literals: f.literals } : {})
    })),
    indexes: e.indexes.map((ix) => ({ name: ix.name, fields: ix.fields }))
  }))
})

export interface Plan {
  readonly problems: ReadonlyArray<string>
  readonly statements: ReadonlyArray<string>
}

/** Compares the installed representation with the catalog's: incompatibilities, or the DDL to apply. */
export const plan = (installed: Representation, catalog: Catalog): Plan => {
  const problems: Array<string> = []
  const statements: Array<string> = []
  const sameLiterals = (a?: ReadonlyArray<unknown>, b?: ReadonlyArray<unknown>) =>
    canonicalJson([...(a ?? [])].sort()) === canonicalJson([...(b ?? [])].sort())
  for (const old of installed.entities) {
    const entity = catalog.entity(old.name)
    if (!entity) {
      problems.push(`entity "${old.name}" was removed, but its table holds data`)
      continue
    }
    for (const was of old.fields) {
      const now = entity.field(was.name)
      if (!now) problems.push(`field "${old.name}.${was.name}" was removed`)
      else if (now.column !== was.column) problems.push(`field "${old.name}.${was.name}" changed its stored type from ${was.column} to ${now.column}`)
      else if (now.nullable !== was.nullable)
        problems.push(`field "${old.name}.${was.name}" changed from ${was.nullable ? "optional" : "required"} to ${now.nullable ? "optional" : "required"}`)
      else if (!sameLiterals(was.literals, now.literals)) problems.push(`field "${old.name}.${was.name}" changed its allowed values`)
    }
    for (const field of entity.fields) {
      if (old.fields.some((f) => f.name === field.name)) continue
      if (!field.nullable) problems.push(`field "${old.name}.${field.name}" is new and required; existing rows have no value`)
      else statements.push(`ALTER TABLE ${Layout.tableName(entity)} ADD COLUMN ${Layout.columnDefinition(field)}`)
    }
    for (const ix of old.indexes) {
      if (!entity.indexes.some((n) => n.name === ix.name)) statements.push(`DROP INDEX IF EXISTS ${Layout.quote(ix.name)}`)
    }
    // Creating the table is a no-op; this adds the indexes it lacks.
    statements.push(...Layout.entityDdl(entity))
  }
  for (const entity of catalog.entities) {
    if (!installed.entities.some((e) => e.name === entity.name)) statements.push(...Layout.entityDdl(entity))
  }
  return { problems, statements }
}

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
      const representation = representationOf(catalog)
      if (found._tag === "None") {
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
      if (current.root !== catalog.name) {
        return yield* new IncompatibleCatalog({
          databaseId,
          problems: [`the database holds root schema "${current.root}", the deployment serves "${catalog.name}"`]
        })
      }
      if (current.representation === canonicalJson(representation)) {
        if (current.catalog_token === catalog.token) return { outcome: "unchanged" as const, installId: held }
      } else {
        const { problems, statements } = plan(yield* decodeRepresentation(current.representation), catalog)
        if (problems.length > 0) return yield* new IncompatibleCatalog({ databaseId, problems })
        for (const statement of statements) yield* sql.unsafe(statement)
      }
      yield* sql.unsafe(
        `UPDATE ${installTable} SET catalog_token = ?, fingerprint = ?, representation = ?, updated_at = ? WHERE id = 1`,
        [catalog.token, catalog.fingerprint, canonicalJson(representation), now]
      )
      return { outcome: "updated" as const, installId: held }
    })
  )

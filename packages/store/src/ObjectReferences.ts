/**
 * Which stored objects a database's records reference: the sha256 of every `File` field
 * value, read from the database file on its own read-only connection (one consistent
 * snapshot, beside the writer), so collection needs no activation and no key.
 */
import { existsSync } from "node:fs"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { type Catalog } from "@cairn/catalog/Catalog"
import { Effect, Option } from "effect"
import { databaseFile } from "./Backup.js"

/**
 * The sha256 of every object the records of database `databaseId` reference; none when
 * the database file does not exist (a failure to read it fails, so nothing is collected).
 */
export const referencedObjects = (dataDir: string, databaseId: string, catalog: Catalog) =>
  Effect.scoped(
    Effect.gen(function* () {
      const filename = databaseFile(dataDir, databaseId)
      if (!existsSync(filename)) return Option.none<ReadonlySet<string>>()
      const sql = yield* SqliteClient.make({ filename, readonly: true })
      const referenced = new Set<string>()
      // One read transaction: every table is read at the same commit.
      yield* sql.withTransaction(
        Effect.forEach(catalog.entities, (entity) =>
          Effect.forEach(entity.fields.filter((f) => f.file), (field) =>
            Effect.map(
              sql<{ s: string }>`SELECT json_extract(${sql(field.name)}, '$.sha256') AS s FROM ${sql(entity.name)} WHERE ${sql(field.name)} IS NOT NULL`,
              (rows) => rows.forEach((row) => referenced.add(row.s))
            )
          )
        )
      )
      return Option.some<ReadonlySet<string>>(referenced)
    })
  ).pipe(Effect.provide(Reactivity.layer))

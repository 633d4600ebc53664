/**
 * `cairn migrate apply`: every database of a data directory brought to the deployment's
 * catalog now rather than on its next activation. Holds the data directory (the `Registry`
 * lock: the server must be stopped), then for each database: installs the catalog (the same
 * change plan activation applies; a refused plan is reported and the database left as it
 * was) and runs its pending migrations batch by batch through a writer of its own.
 */
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Cause, Clock, Effect, Option } from "effect"
import { databaseIds } from "./DatabasePlans.js"
import { install, installIdOf } from "./Install.js"
import { lastPosition } from "./Log.js"
import * as Connection from "./internal/connection.js"
import * as Migrations from "./Migrations.js"
import { type MutationGuardShape } from "./MutationGuard.js"
import { type OperationCatalogShape } from "./OperationCatalog.js"
import { Registry } from "./Registry.js"
import { StoreConfig } from "./StoreConfig.js"
import * as Writer from "./Writer.js"

export interface Applied {
  readonly databaseId: string
  readonly outcome: "unchanged" | "updated" | "refused" | "failed"
  readonly batches: number
  readonly message?: string
}

/** Nothing but migration batches reach this writer. */
const noCallers: MutationGuardShape = { check: () => Effect.dieMessage("migrate apply accepts no invocations but migrations") }

const messageOf = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!
}

/** Applies the catalog and its migrations to one database file (registered or adopted). */
const applyOne = (
  dataDir: string,
  id: string,
  operations: OperationCatalogShape,
  onBatch: (id: string, report: Migrations.BatchReport) => Effect.Effect<void>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const registry = yield* Registry
      const config = yield* StoreConfig
      const filename = join(dataDir, "databases", `${id}.sqlite`)
      const { raw, sql } = yield* Connection.open({ filename })
      yield* sql.unsafe(`PRAGMA synchronous = ${config.synchronous}`)
      const held = yield* installIdOf(sql)
      if (Option.isNone(held)) return { databaseId: id, outcome: "failed", batches: 0, message: "its file has no install record" } satisfies Applied
      const entry = yield* registry.lookup(id)
      if (Option.isSome(entry) && entry.value.install_id !== held.value) {
        return { databaseId: id, outcome: "failed", batches: 0, message: "its file holds another database's install id" } satisfies Applied
      }
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      const installed = yield* Effect.either(install(sql, operations.catalog, id, now, held.value))
      if (installed._tag === "Left") {
        const error = installed.left
        return {
          databaseId: id,
          outcome: "refused",
          batches: 0,
          message: error._tag === "IncompatibleCatalog" ? error.problems.join("; ") : String(error)
        } satisfies Applied
      }
      const writer = yield* Writer.make({
        databaseId: id,
        sql,
        raw,
        operations: Migrations.withMigrations(operations, raw),
        guard: Migrations.guardWith(noCallers),
        queueLimit: config.writerQueueLimit,
        maxBatch: 1
      })
      const batches = yield* Migrations.runPending({ databaseId: id, sql, catalog: operations.catalog, submit: writer.submit, onBatch: (b) => onBatch(id, b) })
      if (Option.isSome(entry)) yield* registry.advance(id, yield* lastPosition(sql))
      return {
        databaseId: id,
        outcome: batches > 0 || installed.right.outcome !== "unchanged" ? "updated" : "unchanged",
        batches
      } satisfies Applied
    })
  ).pipe(
    Effect.catchAllCause((cause) => Effect.succeed<Applied>({ databaseId: id, outcome: "failed", batches: 0, message: messageOf(cause) })),
    Effect.provide(Reactivity.layer)
  )

/**
 * Every database of the data directory, one after another; `onDatabase` before each (index,
 * total) and `onBatch` after each committed batch, for progress. Needs `Registry` (the
 * data directory's lock) and `StoreConfig`.
 */
export const applyAll = (options: {
  readonly operations: OperationCatalogShape
  readonly onDatabase?: (index: number, total: number, id: string) => Effect.Effect<void>
  readonly onBatch?: (id: string, report: Migrations.BatchReport) => Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    const { dataDir } = yield* StoreConfig
    const ids = databaseIds(dataDir)
    const results: Array<Applied> = []
    for (const [i, id] of ids.entries()) {
      if (options.onDatabase) yield* options.onDatabase(i, ids.length, id)
      results.push(yield* applyOne(dataDir, id, options.operations, options.onBatch ?? (() => Effect.void)))
    }
    return results
  })

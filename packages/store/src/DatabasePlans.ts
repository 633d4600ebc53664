/**
 * The change plan of a catalog over every database of a data directory, computed without
 * serving: each database file is opened read-only (safe next to a running server), its install
 * record compared with the catalog and, for changes that need validation, its tables scanned.
 * `cairn check`, `cairn migrate plan` and startup all read this.
 */
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Cause, Effect, Option } from "effect"
import { type Catalog } from "@cairn/catalog/Catalog"
import { canonicalJson } from "@cairn/catalog/Digest"
import * as ChangePlan from "./ChangePlan.js"
import { planFor, problemsOf, readRecord } from "./Install.js"
import { installTable } from "./Log.js"
import * as Migrations from "./Migrations.js"

export interface DatabasePlan {
  /** The database's opaque id (its file name): operator-facing. */
  readonly databaseId: string
  readonly changes: ReadonlyArray<ChangePlan.PlannedChange>
  /** Declared migrations with a step this database has not finished, in order, with the batches already committed. */
  readonly pendingMigrations: ReadonlyArray<{ readonly name: string; readonly batches: number }>
  /** One line per refused change; empty when the catalog can be installed. */
  readonly problems: ReadonlyArray<string>
  /**
   * Set when the file could not be read (damaged, not a database): a storage fault, which
   * activation reports for that database alone, not a catalog problem of the deployment.
   */
  readonly unreadable?: string
}

/** The ids of the databases in `dataDir`, sorted. */
export const databaseIds = (dataDir: string): ReadonlyArray<string> => {
  const directory = join(dataDir, "databases")
  if (!existsSync(directory)) return []
  return readdirSync(directory)
    .filter((f) => /^[0-9a-f]{32}\.sqlite$/.test(f))
    .map((f) => f.slice(0, -".sqlite".length))
    .sort()
}

/** The install record a database holds once it is fully at `catalog` (every migration applied): the common case, found by comparing text. */
const current = new WeakMap<Catalog, string>()
const currentRecord = (catalog: Catalog) => {
  let text = current.get(catalog)
  if (text === undefined) {
    text = canonicalJson(ChangePlan.representationOf(catalog, catalog.migrations.map((m) => m.name)))
    current.set(catalog, text)
  }
  return text
}

/** The plan for one database file; a file without an install record has nothing to plan. */
export const planDatabase = (dataDir: string, databaseId: string, catalog: Catalog) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqliteClient.make({ filename: join(dataDir, "databases", `${databaseId}.sqlite`), readonly: true })
      const raw = yield* Effect.orElseSucceed(
        sql.unsafe<{ readonly root: string; readonly representation: string }>(`SELECT root, representation FROM ${installTable} WHERE id = 1`),
        () => []
      )
      if (raw[0] !== undefined && raw[0].root === catalog.name && raw[0].representation === currentRecord(catalog)) {
        return { databaseId, changes: [], pendingMigrations: [], problems: [] } satisfies DatabasePlan
      }
      const record = yield* readRecord(sql)
      if (Option.isNone(record)) return { databaseId, changes: [], pendingMigrations: [], problems: [] } satisfies DatabasePlan
      const changes = yield* planFor(sql, record.value, catalog)
      const applied = record.value.representation.migrations ?? []
      const progress = yield* Migrations.progressOf(sql)
      return {
        databaseId,
        changes,
        pendingMigrations: catalog.migrations
          .filter((m) => m.step !== undefined && !applied.includes(m.name))
          .map((m) => ({ name: m.name, batches: progress.get(m.name)?.batches ?? 0 })),
        problems: problemsOf(changes)
      } satisfies DatabasePlan
    })
  ).pipe(Effect.provide(Reactivity.layer))

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error)).split("\n")[0]

/** The plan for every database of `dataDir`; a file that cannot be read is a problem of its own. */
export const planDirectory = (dataDir: string, catalog: Catalog): Effect.Effect<ReadonlyArray<DatabasePlan>> =>
  Effect.forEach(databaseIds(dataDir), (databaseId) =>
    planDatabase(dataDir, databaseId, catalog).pipe(
      Effect.catchAllCause((cause) =>
        Effect.succeed<DatabasePlan>({
          databaseId,
          changes: [],
          pendingMigrations: [],
          problems: [],
          unreadable: messageOf(Cause.squash(cause))
        })
      )
    )
  )

/** Every refused change of every database, one line each, prefixed by the database. */
export const problemsOfAll = (plans: ReadonlyArray<DatabasePlan>): ReadonlyArray<string> =>
  plans.flatMap((p) => p.problems.map((line) => `database ${p.databaseId}: ${line}`))

/** The plan as an operator reads it: per database, every change with its verdict and counts. */
export const render = (plans: ReadonlyArray<DatabasePlan>): string => {
  if (plans.length === 0) return "no databases yet: the catalog installs as is"
  const lines: Array<string> = []
  for (const plan of plans) {
    const refused = plan.problems.length
    if (plan.unreadable !== undefined) {
      lines.push(`database ${plan.databaseId}: UNREADABLE (${plan.unreadable}); not planned: it is refused as a storage fault until repaired or restored`)
      continue
    }
    lines.push(`database ${plan.databaseId}: ${refused > 0 ? `REFUSED (${refused} ${refused === 1 ? "problem" : "problems"})` : plan.changes.length === 0 ? "unchanged" : "accepted"}`)
    for (const change of plan.changes) lines.push(`  - ${change.entity === "*" ? `refused: ${change.summary}` : ChangePlan.describeChange(change)}`)
    for (const m of plan.pendingMigrations) {
      lines.push(`  - migration "${m.name}" will run${m.batches > 0 ? ` (resuming after ${m.batches} committed ${m.batches === 1 ? "batch" : "batches"})` : ""}`)
    }
  }
  return lines.join("\n")
}

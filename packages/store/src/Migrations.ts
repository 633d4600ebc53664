/**
 * Explicit migrations, applied per database through its single writer. Each declared
 * migration with a `step` (see `@cairn/catalog/Migration`) runs as a sequence of batches;
 * every batch is one invocation of the internal operation `_cairn.migrate`, submitted to the
 * database's writer like any mutation, so it commits in the database's commit order, is
 * recorded in the commit log with its row changes (sync and receipts see it) and has a
 * receipt. The batch's progress (`_cairn_migrations`) and, on its last batch, the install
 * record's list of applied migrations are written in the same transaction as its changes:
 * a crash (SIGKILL included) leaves the database at a batch boundary, and the next
 * activation (or `cairn migrate apply`) resumes with the next batch. Batch invocation ids are
 * derived from the database, the migration and the batch number, so a resumed batch never
 * runs twice.
 */
import { createHash } from "node:crypto"
import { type SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { type Catalog, type CompiledOperation } from "@cairn/catalog/Catalog"
import { canonicalJson } from "@cairn/catalog/Digest"
import { DatabaseKey, type InvocationId } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import * as ChangePlan from "./ChangePlan.js"
import { installTable } from "./Log.js"
import { type MutationGuardShape } from "./MutationGuard.js"
import { type OperationCatalogShape } from "./OperationCatalog.js"
import type { Raw } from "./internal/connection.js"
import type { Tx } from "./Tx.js"
import type * as Writer from "./Writer.js"

export const progressTable = "_cairn_migrations"

const progressDdl = `CREATE TABLE IF NOT EXISTS ${progressTable} (
  name TEXT PRIMARY KEY NOT NULL,
  batches INTEGER NOT NULL,
  done INTEGER NOT NULL CHECK (done IN (0, 1)),
  updated_at TEXT NOT NULL
) STRICT`

const Input = Schema.Struct({ migration: Schema.String, batch: Schema.Int })
const Output = Schema.Struct({ migration: Schema.String, batch: Schema.Int, state: Schema.Literal("done", "more") })

/** The internal operation each migration batch is an invocation of; never in a catalog, never public. */
export const migrateOperation: CompiledOperation = {
  ref: { kind: "operation", owner: { kind: "entity", name: "_cairn" }, name: "migrate" },
  owner: "_cairn",
  name: "migrate",
  description: "One batch of a declared migration.",
  targeted: false,
  input: Input,
  output: Output,
  inputJsonSchema: {},
  outputJsonSchema: {},
  definition: {
    _tag: "Operation",
    owner: "_cairn",
    name: "migrate",
    description: "One batch of a declared migration.",
    targeted: false,
    input: Input,
    output: Output
  }
}

/** Who a migration batch is committed as (its commit's subject). */
export const migrationPrincipal = new Principal({
  subject: "cairn:migration",
  roles: [],
  claims: {},
  scopes: [],
  databaseKey: DatabaseKey.make("\u0000cairn:migration")
})

const isMigrate = (op: CompiledOperation) => op === migrateOperation || (op.owner === "_cairn" && op.name === "migrate")

const Progress = Schema.Struct({ name: Schema.String, batches: Schema.Number, done: Schema.Number })

const readProgress = (sql: SqlClient.SqlClient, name: string) =>
  Effect.map(
    sql.unsafe<{ readonly name: string; readonly batches: number; readonly done: number }>(
      `SELECT name, batches, done FROM ${progressTable} WHERE name = ?`,
      [name]
    ),
    (rows) => (rows[0] ? Schema.decodeUnknownSync(Progress)(rows[0]) : undefined)
  )

/**
 * Appends `name` to the install record's applied migrations, on the writer's connection inside
 * its group transaction (synchronous: a writer transaction never spans a yield).
 */
const markApplied = (raw: Raw, name: string) =>
  Effect.gen(function* () {
    const row = raw.statement(`SELECT representation FROM ${installTable} WHERE id = 1`).get() as { readonly representation: string }
    const current = yield* ChangePlan.decodeRepresentation(row.representation)
    const applied = current.migrations ?? []
    if (applied.includes(name)) return
    const updated = { ...current, migrations: [...applied, name] }
    raw.statement(`UPDATE ${installTable} SET representation = ? WHERE id = 1`).run(canonicalJson(updated))
  })

/**
 * The catalog's operations plus `_cairn.migrate`, whose handler runs one batch of the named
 * migration over the writer's transactional API, then records the batch on `raw` (the
 * writer's own connection, so inside the same transaction).
 */
export const withMigrations = (operations: OperationCatalogShape, raw: Raw): OperationCatalogShape => ({
  catalog: operations.catalog,
  handler: (op) =>
    isMigrate(op)
      ? (((args: { readonly input: typeof Input.Type; readonly tx: Tx; readonly now: string }) =>
          Effect.gen(function* () {
            const { migration, batch } = args.input
            const declared = operations.catalog.migrations.find((m) => m.name === migration)
            if (!declared?.step) return yield* Effect.dieMessage(`migration "${migration}" has no step`)
            const state = yield* declared.step(args.tx)
            yield* Effect.sync(() =>
              raw
                .statement(
                  `INSERT INTO ${progressTable} (name, batches, done, updated_at) VALUES (?, ?, ?, ?)
                 ON CONFLICT (name) DO UPDATE SET batches = excluded.batches, done = excluded.done, updated_at = excluded.updated_at`
                )
                .run(migration, batch, state === "done" ? 1 : 0, args.now)
            )
            if (state === "done") yield* Effect.orDie(markApplied(raw, migration))
            return { migration, batch, state }
          })) as any)
      : operations.handler(op)
})

/** The guard with migration batches let through (they are the deployment's own, not a caller's). */
export const guardWith = (guard: MutationGuardShape): MutationGuardShape => ({
  check: (check) => (isMigrate(check.operation) ? Effect.void : guard.check(check))
})

/** A UUIDv7-shaped id derived from the database, the migration and the batch: a resumed batch is the same invocation. */
export const batchInvocationId = (databaseId: string, migration: string, batch: number): InvocationId => {
  const h = createHash("sha256").update(`cairn/migration/v1\u0000${databaseId}\u0000${migration}\u0000${batch}`).digest("hex")
  const variant = "89ab"[parseInt(h[16]!, 16) % 4]!
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-7${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}` as InvocationId
}

/** One committed batch, for progress reports. */
export interface BatchReport {
  readonly migration: string
  readonly batch: number
  readonly state: "done" | "more"
  readonly position: string
}

/** The migrations of `catalog` with a step that the database has not finished, in declared order. */
export const pending = (sql: SqlClient.SqlClient, catalog: Catalog) =>
  Effect.gen(function* () {
    const rows = yield* sql.unsafe<{ readonly representation: string }>(`SELECT representation FROM ${installTable} WHERE id = 1`)
    if (!rows[0]) return []
    const applied = (yield* ChangePlan.decodeRepresentation(rows[0].representation)).migrations ?? []
    return catalog.migrations.filter((m) => m.step !== undefined && !applied.includes(m.name))
  })

/**
 * Runs every pending migration of the database to completion, batch by batch through
 * `submit` (the database's writer), resuming after the last committed batch. Answers the
 * batches it committed.
 */
export const runPending = (options: {
  readonly databaseId: string
  readonly sql: SqlClient.SqlClient
  readonly catalog: Catalog
  readonly submit: (invocation: Writer.Invocation) => Effect.Effect<Receipt, Writer.SubmitError>
  readonly onBatch?: (report: BatchReport) => Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    const { catalog, databaseId, sql, submit } = options
    const todo = yield* pending(sql, catalog)
    if (todo.length === 0) return 0
    yield* sql.unsafe(progressDdl)
    let committed = 0
    for (const migration of todo) {
      for (;;) {
        const progress = yield* readProgress(sql, migration.name)
        if (progress?.done === 1) break
        const batch = (progress?.batches ?? 0) + 1
        const input = { migration: migration.name, batch }
        const receipt = yield* submit({
          invocationId: batchInvocationId(databaseId, migration.name, batch),
          operation: migrateOperation,
          target: undefined,
          input,
          intent: createHash("sha256").update(canonicalJson({ migrate: input, databaseId })).digest("base64url"),
          principal: migrationPrincipal,
          catalogToken: catalog.token
        })
        if (receipt.outcome !== "committed") return yield* Effect.dieMessage(`migration "${migration.name}" batch ${batch} was rejected: ${receipt.reason ?? ""}`)
        committed += 1
        const state = (receipt.output as typeof Output.Type).state
        if (options.onBatch) yield* options.onBatch({ migration: migration.name, batch, state, position: receipt.position })
        if (state === "done") break
      }
    }
    return committed
  })

/** How far each declared migration with a step got in a database (read-only; for plans). */
export const progressOf = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const tables = yield* sql.unsafe<{ readonly n: number }>(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?`, [progressTable])
    if (Number(tables[0]?.n ?? 0) === 0) return new Map<string, { readonly batches: number; readonly done: boolean }>()
    const rows = yield* sql.unsafe<{ readonly name: string; readonly batches: number; readonly done: number }>(`SELECT name, batches, done FROM ${progressTable}`)
    return new Map(rows.map((r) => [r.name, { batches: Number(r.batches), done: Number(r.done) === 1 }]))
  })

/**
 * `npm run bench -- evolution`: what catalog evolution costs at startup and in a plan.
 * - `startup`: planning an unchanged catalog over 300 databases (what `cairn serve` does before
 *   binding), against the baseline of opening each file read-only and reading one row.
 * - `scan`: planning a tightened constraint over one database of 100,000 rows (the validation
 *   scan decodes every stored value with the new schema), against reading that column raw.
 * Prints `evolution: startup_ms=… baseline_ms=… ratio=… | scan_ms=… baseline_ms=… ratio=… rows=…`.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Schema } from "effect"
import { Entity, RootSchema } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { DatabasePlans, Install } from "@cairn/store"

const DATABASES = 300
const ROWS = 100_000

const root = (maxLength: number) =>
  RootSchema.make("bench", {
    entities: [Entity.make("Note", { description: "A note.", fields: { title: Schema.String.pipe(Schema.maxLength(maxLength)), count: Schema.Int } })]
  })

const time = async <A>(effect: Effect.Effect<A, unknown>) => {
  const start = performance.now()
  const value = await Effect.runPromise(effect)
  return { ms: performance.now() - start, value }
}

/** Reads one row of every database file, read-only: the floor of any per-database startup check. */
const openEach = (dataDir: string, ids: ReadonlyArray<string>) =>
  Effect.forEach(ids, (id) =>
    Effect.scoped(
      Effect.flatMap(SqliteClient.make({ filename: join(dataDir, "databases", `${id}.sqlite`), readonly: true }), (sql) =>
        sql.unsafe(`SELECT representation FROM _cairn_install WHERE id = 1`)
      )
    ).pipe(Effect.provide(Reactivity.layer))
  )

export const run = async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-evolution-"))
  try {
    const v1 = await Effect.runPromise(compile(root(200)))
    const tightened = await Effect.runPromise(compile(root(30)))
    mkdirSync(join(dataDir, "databases"))
    const first = "0".repeat(32)
    // One database with ROWS notes (titles of 10..60 characters), then copies of it.
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* SqliteClient.make({ filename: join(dataDir, "databases", `${first}.sqlite`) })
          yield* Install.install(sql, v1, first, new Date().toISOString(), crypto.randomUUID())
          yield* sql.withTransaction(
            Effect.forEach(Array.from({ length: ROWS }, (_, i) => i), (i) =>
              sql.unsafe(`INSERT INTO "Note" (id, title, count) VALUES (?, ?, ?)`, [`n${i}`, "x".repeat(10 + (i % 51)), i])
            )
          )
          yield* sql.unsafe("PRAGMA wal_checkpoint(TRUNCATE)")
        })
      ).pipe(Effect.provide(Reactivity.layer))
    )
    const small = "1".repeat(32)
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* SqliteClient.make({ filename: join(dataDir, "databases", `${small}.sqlite`) })
          yield* Install.install(sql, v1, small, new Date().toISOString(), crypto.randomUUID())
          yield* sql.unsafe("PRAGMA wal_checkpoint(TRUNCATE)")
        })
      ).pipe(Effect.provide(Reactivity.layer))
    )

    // Scan: the plan of a tightened constraint over the big database, against reading the column.
    await time(DatabasePlans.planDatabase(dataDir, first, tightened)) // warm
    const scanned = await time(DatabasePlans.planDatabase(dataDir, first, tightened))
    const raw = await time(
      Effect.scoped(
        Effect.flatMap(SqliteClient.make({ filename: join(dataDir, "databases", `${first}.sqlite`), readonly: true }), (sql) =>
          sql.unsafe(`SELECT title FROM "Note"`)
        )
      ).pipe(Effect.provide(Reactivity.layer))
    )
    const offending = scanned.value.changes.find((c) => c.kind === "validate")?.offending
    rmSync(join(dataDir, "databases", `${first}.sqlite`))

    // Startup: many small databases, unchanged catalog.
    const ids = Array.from({ length: DATABASES }, (_, i) => (0x200000 + i).toString(16).padStart(32, "0"))
    for (const id of ids) copyFileSync(join(dataDir, "databases", `${small}.sqlite`), join(dataDir, "databases", `${id}.sqlite`))
    await time(openEach(dataDir, [small, ...ids])) // warm the page cache for both
    const baseline = await time(openEach(dataDir, [small, ...ids]))
    const planned = await time(DatabasePlans.planDirectory(dataDir, v1))
    const refused = DatabasePlans.problemsOfAll(planned.value).length
    console.log(
      `evolution: startup_ms=${planned.ms.toFixed(0)} baseline_ms=${baseline.ms.toFixed(0)} ratio=${(planned.ms / baseline.ms).toFixed(2)} databases=${planned.value.length} refused=${refused}` +
        ` | scan_ms=${scanned.ms.toFixed(0)} baseline_ms=${raw.ms.toFixed(0)} ratio=${(scanned.ms / raw.ms).toFixed(2)} rows=${ROWS} offending=${offending}`
    )
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

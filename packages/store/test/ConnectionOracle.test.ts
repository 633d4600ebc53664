// The @effect/sql face of `internal/connection` against the client it mirrors,
// `@effect/sql-sqlite-node`'s `SqliteClient`: the same statements on two files of the same schema
// answer the same rows, values, raw results and errors, and transactions (nested ones as
// savepoints) commit and roll back alike. The two known differences are pinned at the end.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Either, Stream } from "effect"
import fc from "fast-check"
import * as Connection from "../src/internal/connection.js"

const schema = [
  `CREATE TABLE "Task" (id TEXT PRIMARY KEY, title TEXT NOT NULL, priority INTEGER, score REAL, data BLOB)`,
  `CREATE INDEX "Task_priority" ON "Task" (priority)`
]

/** Both clients, each on a fresh file of the schema. */
const clients = Effect.gen(function* () {
  const dir = mkdtempSync(join(tmpdir(), "cairn-connection-oracle-"))
  const mine = (yield* Connection.open({ filename: join(dir, "mine.sqlite") })).sql
  const theirs = yield* SqliteClient.make({ filename: join(dir, "theirs.sqlite") })
  for (const sql of [mine, theirs]) for (const statement of schema) yield* sql.unsafe(statement)
  return { mine, theirs: theirs as SqlClient.SqlClient }
}).pipe(Effect.provide(Reactivity.layer))

/** An answer as comparable data: the value, or the error's tag, message and cause's message. */
const outcome = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (either) =>
    Either.isRight(either)
      ? { ok: either.right as unknown }
      : { error: { tag: (either.left as { _tag?: string })._tag, message: (either.left as Error).message, cause: String(((either.left as { cause?: unknown }).cause as Error)?.message) } }
  )

type Step = (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>

const value = fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.double({ noNaN: true }), fc.constant(null), fc.uint8Array({ maxLength: 4 }).map((a) => Buffer.from(a)))
const id = fc.constantFrom("a", "b", "c", "d")

/** Statements of every kind each face runs: reads and writes through each executor, failing ones too. */
const step: fc.Arbitrary<readonly [string, Step]> = fc.oneof(
  fc.tuple(id, fc.string({ maxLength: 5 }), value, value).map(([i, t, p, d]) => [`insert ${i}`, (sql: SqlClient.SqlClient) => sql`INSERT INTO "Task" (id, title, priority, data) VALUES (${i}, ${t}, ${p as never}, ${d as never})`] as const),
  fc.tuple(id, fc.double({ noNaN: true })).map(([i, s]) => [`update ${i}`, (sql: SqlClient.SqlClient) => sql`UPDATE "Task" SET score = ${s} WHERE id = ${i}`.raw] as const),
  fc.constant([`select rows`, (sql: SqlClient.SqlClient) => sql`SELECT * FROM "Task" ORDER BY id`] as const),
  fc.constant([`select values`, (sql: SqlClient.SqlClient) => sql`SELECT id, title, priority, score, data FROM "Task" ORDER BY id`.values] as const),
  fc.integer({ min: -2, max: 5 }).map((p) => [`select where`, (sql: SqlClient.SqlClient) => sql`SELECT id FROM "Task" WHERE priority > ${p} ORDER BY id`.values] as const),
  fc.constant([`delete raw`, (sql: SqlClient.SqlClient) => sql`DELETE FROM "Task" WHERE id = 'a'`.raw] as const),
  fc.constant([`unprepared`, (sql: SqlClient.SqlClient) => sql`SELECT count(*) AS n FROM "Task"`.unprepared] as const),
  fc.constant([`unsafe with params`, (sql: SqlClient.SqlClient) => sql.unsafe(`SELECT id FROM "Task" WHERE id IN (?, ?) ORDER BY id`, ["a", "b"])] as const),
  fc.constant([`syntax error`, (sql: SqlClient.SqlClient) => sql.unsafe(`SELEC nothing`)] as const),
  fc.constant([`missing table`, (sql: SqlClient.SqlClient) => sql`SELECT * FROM "Nope"`] as const),
  fc.constant([`constraint`, (sql: SqlClient.SqlClient) => sql`INSERT INTO "Task" (id, title) VALUES (${"x"}, ${null})`] as const),
  fc.tuple(id, fc.boolean()).map(([i, fail]) => [
    `transaction ${fail ? "rolled back" : "committed"}`,
    (sql: SqlClient.SqlClient) =>
      sql.withTransaction(Effect.zipRight(sql`INSERT OR REPLACE INTO "Task" (id, title) VALUES (${i}, 'tx')`, fail ? Effect.fail("abort") : Effect.succeed("done")))
  ] as const),
  fc.tuple(id, fc.boolean()).map(([i, failInner]) => [
    `nested transaction, inner ${failInner ? "rolled back" : "committed"}`,
    (sql: SqlClient.SqlClient) =>
      sql.withTransaction(
        Effect.zipRight(
          sql`INSERT OR REPLACE INTO "Task" (id, title) VALUES (${i}, 'outer')`,
          Effect.either(sql.withTransaction(Effect.zipRight(sql`UPDATE "Task" SET title = 'inner' WHERE id = ${i}`, failInner ? Effect.fail("inner") : Effect.void)))
        )
      )
  ] as const)
)

describe("connection's @effect/sql face against SqliteClient", () => {
  it.scoped("answers every statement of random sequences alike, and leaves the same rows", () =>
    Effect.gen(function* () {
      const { mine, theirs } = yield* clients
      for (const steps of fc.sample(fc.array(step, { minLength: 1, maxLength: 12 }), 60)) {
        for (const [name, run] of steps) {
          assert.deepStrictEqual(yield* outcome(run(mine)), yield* outcome(run(theirs)), name)
        }
        const all = (sql: SqlClient.SqlClient) => sql`SELECT * FROM "Task" ORDER BY id`
        assert.deepStrictEqual(yield* all(mine), yield* all(theirs))
        yield* mine`DELETE FROM "Task"`
        yield* theirs`DELETE FROM "Task"`
      }
    }))

  it.scoped("known differences: it streams (SqliteClient's stream dies), and it ignores SafeIntegers", () =>
    Effect.gen(function* () {
      const { mine, theirs } = yield* clients
      for (const sql of [mine, theirs]) yield* sql`INSERT INTO "Task" (id, title, priority) VALUES ('a', 't', 9007199254740993)`
      const stream = (sql: SqlClient.SqlClient) => Effect.exit(Stream.runCollect(sql`SELECT id FROM "Task"`.stream))
      assert.deepStrictEqual(Chunk.toReadonlyArray((yield* Effect.flatten(stream(mine))) as Chunk.Chunk<unknown>), [{ id: "a" }])
      assert.isTrue((yield* stream(theirs))._tag === "Failure")
      // SqliteClient honours SafeIntegers for rows (not for `.values`); nothing in Cairn provides SafeIntegers.
      const safe = (sql: SqlClient.SqlClient) => sql<{ priority: unknown }>`SELECT priority FROM "Task"`.pipe(Effect.provideService(SqlClient.SafeIntegers, true))
      assert.strictEqual(typeof (yield* safe(mine))[0]!.priority, "number")
      assert.strictEqual(typeof (yield* safe(theirs))[0]!.priority, "bigint")
    }))
})

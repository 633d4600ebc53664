import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Databases } from "@cairn/store/Databases"
import * as Connection from "../src/internal/connection.js"
import { fullView, mutate, pause, principal, request, storeLayer, tempDir } from "./support/notes.js"

describe("idle trim", () => {
  it.live("a trimmed connection drops its prepared statements and keeps working; never during a transaction", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dataDir = yield* tempDir
        const connection = yield* Connection.open({ filename: join(dataDir, "file.sqlite"), cacheKib: 2048 })
        const { raw } = connection
        raw.exec(`CREATE TABLE t (v TEXT)`)
        const insert = `INSERT INTO t VALUES (?)`
        const first = raw.statement(insert)
        first.run("one")
        assert.strictEqual(raw.statement(insert), first)
        assert.deepStrictEqual(raw.values(`SELECT v FROM t`, []), [["one"]])

        // Inside a transaction it does nothing: the statements and the open transaction stay as they were.
        raw.exec("BEGIN IMMEDIATE")
        raw.statement(insert).run("two")
        raw.trim()
        assert.strictEqual(raw.statement(insert), first)
        assert.isTrue(raw.inTransaction())
        raw.exec("COMMIT")

        // Idle, it drops them: the next use prepares again, and reads what was committed.
        raw.trim()
        const again = raw.statement(insert)
        assert.notStrictEqual(again, first)
        again.run("three")
        assert.deepStrictEqual(raw.values(`SELECT v FROM t ORDER BY v`, []), [["one"], ["three"], ["two"]])
        assert.deepStrictEqual(
          yield* Effect.orDie(connection.sql.unsafe<{ v: string }>(`SELECT v FROM t ORDER BY v`)),
          [{ v: "one" }, { v: "three" }, { v: "two" }]
        )
      }).pipe(Effect.provide(Reactivity.layer))
    ))

  it.live("a database gone idle (and trimmed) serves writes and reads as before", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dataDir = yield* tempDir
        yield* Effect.gen(function* () {
          const view = yield* fullView
          yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "one" }) })
          // Past the shared reference's linger (a second): the database is idle, still open, trimmed.
          yield* pause(1300)
          const databases = yield* Databases
          assert.strictEqual((yield* databases.open).length, 1)
          yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "two" }) })
          const titles = yield* databases.withDatabase(DatabaseKey.make("org-acme"), (db) => db.values(`SELECT title FROM "Note" ORDER BY title`, []))
          assert.deepStrictEqual(titles, [["one"], ["two"]])
        }).pipe(Effect.provide(storeLayer({ dataDir })))
      })
    ))
})

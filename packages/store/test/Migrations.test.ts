// Declared migrations run on activation, batch by batch through the database's writer: each
// batch is a commit of the log (with its row changes, as sync reads them), the install record
// lists the migration once finished, and the next activation has nothing left to do.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Entity, Migration, RootSchema } from "@cairn/catalog"
import { Tx } from "@cairn/store"
import { activate, fullView, mutate, Note, notes, principal, request, storeLayer, tempDir } from "./support/notes.js"

const keyA = "org-acme"

const withColour = (migrations: ReadonlyArray<Migration.Migration>) =>
  RootSchema.make("notes", {
    entities: [Entity.make("Note", { description: "A note with a counter.", fields: { ...Note.fields, colour: Schema.optional(Schema.String) }, indexes: [["title"]] })],
    operations: notes.operations,
    migrations
  })

/** Backfills `colour` two notes per batch. */
const backfill = Migration.make<Tx.Tx>({
  name: "backfill-colour",
  description: "Every note gets a colour.",
  step: (tx) =>
    Effect.gen(function* () {
      const todo = yield* tx.findBy("Note", { colour: undefined })
      for (const note of todo.slice(0, 2)) yield* tx.patch("Note", note.id, { colour: "grey" })
      return todo.length > 2 ? "more" : "done"
    })
})

const rowsOf = (text: string) => (db: { readonly reader: { readonly unsafe: (q: string) => Effect.Effect<ReadonlyArray<any>, any> } }) => Effect.orDie(db.reader.unsafe(text))

describe("migrations", () => {
  it.scoped("run on activation in batches, each a commit of the log with its changes, once", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const view = yield* fullView
        for (const title of ["a", "b", "c", "d", "e"]) yield* mutate({ view, principal: principal("alice", keyA), request: request("Note", "create", { title }) })
      }).pipe(Effect.provide(storeLayer({ dataDir })))

      const root = withColour([backfill])
      const after = yield* Effect.scoped(
        Effect.gen(function* () {
          const db = yield* activate(keyA)
          return {
            notes: yield* rowsOf(`SELECT colour FROM "Note"`)(db),
            commits: yield* rowsOf(`SELECT position, operation, subject, changes FROM _cairn_commits WHERE position > 5 ORDER BY position`)(db),
            install: yield* rowsOf(`SELECT representation FROM _cairn_install`)(db)
          }
        })
      ).pipe(Effect.provide(storeLayer({ dataDir, root })))
      assert.deepStrictEqual(after.notes.map((n) => n.colour), ["grey", "grey", "grey", "grey", "grey"])
      assert.deepStrictEqual(after.commits.map((c) => [c.position, c.operation, c.subject, JSON.parse(c.changes).length]), [
        [6, "_cairn.migrate", "cairn:migration", 2],
        [7, "_cairn.migrate", "cairn:migration", 2],
        [8, "_cairn.migrate", "cairn:migration", 1]
      ])
      assert.deepStrictEqual(JSON.parse(after.install[0]!.representation).migrations, ["backfill-colour"])

      // Activated again: nothing left to run.
      const again = yield* Effect.scoped(Effect.flatMap(activate(keyA), rowsOf(`SELECT max(position) AS p FROM _cairn_commits`))).pipe(
        Effect.provide(storeLayer({ dataDir, root }))
      )
      assert.strictEqual(again[0]!.p, 8)
    }))

  it.scoped("a database created under the migration has nothing to migrate", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const root = withColour([backfill])
      const rows = yield* Effect.scoped(Effect.flatMap(activate(keyA), rowsOf(`SELECT representation FROM _cairn_install`))).pipe(
        Effect.provide(storeLayer({ dataDir, root }))
      )
      assert.deepStrictEqual(JSON.parse(rows[0]!.representation).migrations, ["backfill-colour"])
    }))
})

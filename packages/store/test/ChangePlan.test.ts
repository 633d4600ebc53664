// The change plan over databases holding data: every kind of change × its verdict
// (accepted, validated-ok, validated-refused with a count, refused, migrated), computed
// from the install records and a scan, before anything is activated; then the accepted
// plans installed by activation, the data read back under the new catalog.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Entity, Migration, RootSchema } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { DatabasePlans } from "@cairn/store"
import { databaseId } from "@cairn/store/Databases"
import { activate, fullView, mutate, Note, notes, principal, request, storeLayer, tempDir } from "./support/notes.js"

const keyA = "org-acme"
const keyB = "org-globex"
const idA = databaseId(DatabaseKey.make(keyA))
const idB = databaseId(DatabaseKey.make(keyB))

const Label = Entity.make("Label", { description: "A label.", fields: { name: Schema.String } })

const rootWith = (
  fields: Record<string, Schema.Schema.Any | Schema.PropertySignature.Any>,
  extra: { readonly entities?: ReadonlyArray<Entity.Entity<string, any>>; readonly migrations?: ReadonlyArray<Migration.Migration> } = {}
) =>
  RootSchema.make("notes", {
    entities: [Entity.make("Note", { description: "A note with a counter.", fields: fields as Schema.Struct.Fields, indexes: [["title"]] }), ...(extra.entities ?? [])],
    operations: notes.operations,
    ...(extra.migrations ? { migrations: extra.migrations } : {})
  })

const { title, done, count, tag } = Note.fields

/** Database A: a long title and a note without a tag; database B: one short, tagged note. */
const seed = (dataDir: string, root: RootSchema.RootSchema = notes) =>
  Effect.gen(function* () {
    const view = yield* fullView
    yield* mutate({ view, principal: principal("alice", keyA), request: request("Note", "create", { title: "Short", tag: "x" }) })
    yield* mutate({ view, principal: principal("alice", keyA), request: request("Note", "create", { title: "A much longer title than ten" }) })
    yield* mutate({ view, principal: principal("bob", keyB), request: request("Note", "create", { title: "Hi", tag: "y" }) })
  }).pipe(Effect.provide(storeLayer({ dataDir, root })))

type Verdict =
  | "accepted"
  | "validated-ok"
  | `validated-refused(${number})`
  | "refused"
  | "migrated"
  | `migrated(${number} converted)`
  | `migrated(${number} converted, ${number} discarded)`
  | `migration-refused(${number})`
  | `lost-refused(${number})`

/** The verdict of the one non-index change of each database's plan. */
const verdicts = (dataDir: string, root: RootSchema.RootSchema) =>
  Effect.gen(function* () {
    const catalog = yield* Effect.orDie(compile(root))
    const plans = yield* DatabasePlans.planDirectory(dataDir, catalog)
    const of = (id: string): ReadonlyArray<Verdict> => {
      const plan = plans.find((p) => p.databaseId === id)!
      return plan.changes
        .filter((c) => !c.summary.startsWith("index "))
        .map((c): Verdict =>
          c.kind === "additive"
            ? "accepted"
            : c.kind === "validate"
              ? c.refused
                ? `validated-refused(${c.offending!})`
                : "validated-ok"
              : c.coveredBy !== undefined && c.lost !== undefined
                ? c.refused
                  ? c.offending! > 0
                    ? `migration-refused(${c.offending!})`
                    : `lost-refused(${c.lost})`
                  : c.lost > 0
                    ? `migrated(${c.converted!} converted, ${c.lost} discarded)`
                    : `migrated(${c.converted!} converted)`
                : c.coveredBy !== undefined
                ? c.refused
                  ? `migration-refused(${c.offending!})`
                  : "migrated"
                : "refused"
        )
    }
    return { A: of(idA), B: of(idB), problems: DatabasePlans.problemsOfAll(plans), rendered: DatabasePlans.render(plans) }
  })

describe("the change plan over databases holding data", () => {
  it.scoped("classifies every kind of change per database, with counts of offending rows and no values", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* seed(dataDir)
      const matrix: ReadonlyArray<readonly [string, RootSchema.RootSchema, ReadonlyArray<Verdict>, ReadonlyArray<Verdict>]> = [
        ["new optional field", rootWith({ title, done, count, tag, rank: Schema.optional(Schema.Int) }), ["accepted"], ["accepted"]],
        ["new entity", rootWith({ title, done, count, tag }, { entities: [Label] }), ["accepted"], ["accepted"]],
        ["relaxed constraint", rootWith({ title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)), done, count, tag }), ["accepted"], ["accepted"]],
        ["required field becomes optional", rootWith({ title, done, count: Schema.optional(Schema.Int), tag }), ["accepted"], ["accepted"]],
        ["tightened constraint", rootWith({ title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10)), done, count, tag }), ["validated-refused(1)"], ["validated-ok"]],
        ["optional field becomes required", rootWith({ title, done, count, tag: Schema.String }), ["validated-refused(1)"], ["validated-ok"]],
        ["new required field", rootWith({ title, done, count, tag, rank: Schema.Int }), ["validated-refused(2)"], ["validated-refused(1)"]],
        ["changed stored type", rootWith({ title, done, count: Schema.String, tag }), ["refused"], ["refused"]],
        ["removed field", rootWith({ title, done, count }), ["refused"], ["refused"]],
        ["renamed field", rootWith({ title, done, count, label: tag }), ["refused", "accepted"], ["refused", "accepted"]],
        [
          "changed stored type of an optional field, covered without a conversion: its stored values would be lost",
          rootWith({ title, done, count, tag: Schema.optional(Schema.Int) }, { migrations: [Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag"] })] }),
          ["lost-refused(1)"],
          ["lost-refused(1)"]
        ],
        [
          "changed stored type of an optional field, covered, its values discarded by name",
          rootWith({ title, done, count, tag: Schema.optional(Schema.Int) }, { migrations: [Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag"], discards: ["Note.tag"] })] }),
          ["migrated(0 converted, 1 discarded)"],
          ["migrated(0 converted, 1 discarded)"]
        ],
        [
          "changed stored type of an optional field, covered with a conversion of every value",
          rootWith({ title, done, count, tag: Schema.optional(Schema.Int) }, { migrations: [Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag"], convert: { "Note.tag": (v) => String(v).length } })] }),
          ["migrated(1 converted)"],
          ["migrated(1 converted)"]
        ],
        [
          "changed stored type of an optional field, covered with a conversion that fails for some values (or answers a value the new type rejects)",
          rootWith({ title, done, count, tag: Schema.optional(Schema.Int) }, { migrations: [Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag"], convert: { "Note.tag": (v) => (v === "x" ? 7 : "not a number") } })] }),
          ["migrated(1 converted)"],
          ["lost-refused(1)"]
        ],
        [
          "changed stored type of a required field, covered with a conversion of every value",
          rootWith({ title, done, count: Schema.String, tag }, { migrations: [Migration.make({ name: "retype-count", description: "Counts are text.", covers: ["Note"], convert: { "Note.count": (v) => `#${v}` } })] }),
          ["migrated(2 converted)"],
          ["migrated(1 converted)"]
        ],
        [
          "changed stored type of a required field, covered: every stored row would lose its value",
          rootWith({ title, done, count: Schema.String, tag }, { migrations: [Migration.make({ name: "retype-count", description: "Counts are text.", covers: ["Note"] })] }),
          ["migration-refused(2)"],
          ["migration-refused(1)"]
        ],
        [
          "removed field, covered by a migration",
          rootWith({ title, done, count }, { migrations: [Migration.make({ name: "drop-tag", description: "Tags are gone.", covers: ["Note.tag"] })] }),
          ["migrated"],
          ["migrated"]
        ]
      ]
      for (const [kind, root, a, b] of matrix) {
        const got = yield* verdicts(dataDir, root)
        assert.deepStrictEqual({ kind, A: got.A, B: got.B }, { kind, A: a, B: b })
        // Counts only: no stored value ever appears in the plan.
        for (const value of ["Short", "A much longer", "Hi", '"x"', '"y"']) assert.notInclude(got.rendered, value, kind)
      }
      // A covered removal is accepted, and says what it drops (A: one tagged note of two; B: one).
      const removal = yield* verdicts(dataDir, rootWith({ title, done, count }, { migrations: [Migration.make({ name: "drop-tag", description: "Tags are gone.", covers: ["Note.tag"] })] }))
      assert.strictEqual(removal.rendered.match(/migrated: field "Note\.tag" was removed \(or renamed\) \(covered by migration "drop-tag"\): drops 1 stored value$/gm)?.length, 2)
      const tightened = yield* verdicts(dataDir, rootWith({ title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10)), done, count, tag: Schema.String }))
      assert.deepStrictEqual(tightened.problems, [
        `database ${idA}: refused (needs validation): field "Note.title" changed its constraints (maxLength 100 → 10): 1 stored row violates it`,
        `database ${idA}: refused (needs validation): field "Note.tag" became required: 1 stored row violates it`
      ].sort((x, y) => (x.includes("title") ? -1 : y.includes("title") ? 1 : 0)))
    }))

  it.scoped("a literal union may grow (the table is rebuilt to accept the new literal) but not narrow", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const status = (...values: ReadonlyArray<string>) => Schema.optional(Schema.Literal(...values))
      const v1 = rootWith({ title, done, count, tag, status: status("open", "closed") })
      yield* seed(dataDir, v1)
      assert.deepStrictEqual((yield* verdicts(dataDir, rootWith({ title, done, count, tag, status: status("open", "closed", "archived") }))).A, ["accepted"])
      assert.deepStrictEqual((yield* verdicts(dataDir, rootWith({ title, done, count, tag, status: status("open") }))).A, ["refused"])
      const v2 = rootWith({ title, done, count, tag, status: status("open", "closed", "archived") })
      const ddl = yield* Effect.scoped(
        Effect.flatMap(activate(keyA), (db) => db.reader.unsafe<{ readonly sql: string; readonly n: number }>(`SELECT sql, (SELECT count(*) FROM "Note") AS n FROM sqlite_schema WHERE name = 'Note'`))
      ).pipe(Effect.orDie, Effect.provide(storeLayer({ dataDir, root: v2 })))
      assert.include(ddl[0]!.sql, "'archived'")
      assert.strictEqual(ddl[0]!.n, 2)
      assert.deepStrictEqual((yield* verdicts(dataDir, v2)).A, [])
    }))

  it.scoped("accepted plans are installed on activation: validated changes, migrated removals; refused ones fail activation", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* seed(dataDir)
      // B satisfies the tightened constraint and the required tag: installed; A does not.
      const strict = rootWith({ title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10)), done, count, tag: Schema.String })
      const readB = yield* Effect.scoped(
        Effect.flatMap(activate(keyB), (db) => db.reader.unsafe<{ readonly sql: string }>(`SELECT sql FROM sqlite_schema WHERE name = 'Note'`))
      ).pipe(Effect.orDie, Effect.provide(storeLayer({ dataDir, root: strict })))
      assert.match(readB[0]!.sql, /"tag" TEXT NOT NULL/)
      const refusedA = yield* Effect.either(Effect.scoped(activate(keyA))).pipe(Effect.provide(storeLayer({ dataDir, root: strict })))
      assert.isTrue(refusedA._tag === "Left")
      assert.include(String((refusedA as any).left.message), "1 stored row violates it")

      // A removal covered by a migration drops the column; the rows stay.
      const dropped = rootWith({ title, done, count }, { migrations: [Migration.make({ name: "drop-tag", description: "Tags are gone.", covers: ["Note.tag"] })] })
      const rows = yield* Effect.scoped(
        Effect.flatMap(activate(keyA), (db) => db.reader.unsafe<Record<string, unknown>>(`SELECT * FROM "Note" ORDER BY title`))
      ).pipe(Effect.orDie, Effect.provide(storeLayer({ dataDir, root: dropped })))
      assert.deepStrictEqual(rows.map((r) => Object.keys(r).sort()), [["count", "done", "id", "title"], ["count", "done", "id", "title"]])
      assert.deepStrictEqual((yield* verdicts(dataDir, dropped)).A, [])

      // A covered retype without a conversion would null B's stored tag: refused, B untouched.
      const lossy = rootWith(
        { title, done, count, tag: Schema.optional(Schema.Int) },
        { migrations: [Migration.make({ name: "drop-tag", description: "Tags are gone.", covers: ["Note.tag"] }), Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag"] })] }
      )
      const refusedB = yield* Effect.either(Effect.scoped(activate(keyB))).pipe(Effect.provide(storeLayer({ dataDir, root: lossy })))
      assert.isTrue(refusedB._tag === "Left")
      assert.include(String((refusedB as any).left.message), `refused (would lose data): field "Note.tag" changed its stored type from text to integer: 1 stored value would be lost`)
      // With a conversion: the column is rebuilt under its new type, holding the converted values; a
      // required retyped field is filled as its rows are copied.
      const retyped = rootWith(
        { title, done, count: Schema.String, tag: Schema.optional(Schema.Int) },
        {
          migrations: [
            Migration.make({ name: "drop-tag", description: "Tags are gone.", covers: ["Note.tag"] }),
            Migration.make({ name: "retype-tag", description: "Tags are numbers.", covers: ["Note.tag", "Note.count"], convert: { "Note.tag": (v) => String(v).length + 40, "Note.count": (v) => `#${v}` } })
          ]
        }
      )
      const afterRetype = yield* Effect.scoped(
        Effect.flatMap(activate(keyB), (db) => db.reader.unsafe<Record<string, unknown>>(`SELECT title, tag, count, (SELECT sql FROM sqlite_schema WHERE name = 'Note') AS ddl FROM "Note"`))
      ).pipe(Effect.orDie, Effect.provide(storeLayer({ dataDir, root: retyped })))
      assert.deepStrictEqual(afterRetype.map((r) => [r.title, r.tag, r.count]), [["Hi", 41, "#0"]])
      assert.match(String(afterRetype[0]!.ddl), /"tag" INTEGER/)
      assert.match(String(afterRetype[0]!.ddl), /"count" TEXT NOT NULL/)
    }))
})

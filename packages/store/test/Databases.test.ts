import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Metric, Option, Schema, Scope, TestClock } from "effect"
import { Entity, RootSchema } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { type Receipt } from "@cairn/domain/Receipt"
import { Install } from "@cairn/store"
import { activations, ActivationError, Databases, databaseId, evictions } from "@cairn/store/Databases"
import { fullView, mutate, notes, Note, principal, request, storeLayer, tempDir } from "./support/notes.js"

const keyA = "org-acme"
const keyB = "org-globex"

const create = (title: string, databaseKey = keyA) =>
  Effect.flatMap(fullView, (view) =>
    mutate({ view, principal: principal("alice", databaseKey), request: request("Note", "create", { title }) })
  )

const query = (databaseKey: string, text: string) =>
  Effect.scoped(
    Effect.flatMap(Databases, (d) =>
      Effect.flatMap(d.activate(DatabaseKey.make(databaseKey)), (db) => Effect.orDie(db.reader.unsafe<Record<string, any>>(text)))
    )
  )

const openIds = Effect.flatMap(Databases, (d) => d.open)
const touch = (key: string) => Effect.scoped(Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(key))))
const counter = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (s) => s.count)

describe("Databases", () => {
  it.scoped("one file per database, named by a digest of the key, laid out from the catalog", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("In A", keyA)
        yield* create("In B", keyB)
        const files = readdirSync(join(dataDir, "databases")).filter((f) => f.endsWith(".sqlite")).sort()
        assert.deepStrictEqual(files, [`${databaseId(DatabaseKey.make(keyA))}.sqlite`, `${databaseId(DatabaseKey.make(keyB))}.sqlite`].sort())
        assert.isFalse(readdirSync(join(dataDir, "databases")).some((f) => f.includes("acme") || f.includes("globex")))
        assert.notInclude(databaseId(DatabaseKey.make(keyA)), "acme")
        assert.deepStrictEqual((yield* query(keyA, `SELECT title FROM "Note"`)).map((r) => r.title), ["In A"])
        assert.deepStrictEqual((yield* query(keyB, `SELECT title FROM "Note"`)).map((r) => r.title), ["In B"])

        const tables = (yield* query(keyA, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)).map((r) => r.name)
        assert.deepStrictEqual(tables, ["Note", "_cairn_commits", "_cairn_compaction", "_cairn_directory", "_cairn_install", "_cairn_receipts", "_cairn_retention"])
        const indexes = (yield* query(keyA, `SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'ix_%'`)).map((r) => r.name)
        assert.deepStrictEqual(indexes, ["ix_Note_title"])
        const catalog = yield* Effect.orDie(compile(notes))
        const install = (yield* query(keyA, `SELECT root, catalog_token, fingerprint FROM _cairn_install`))[0]
        assert.deepStrictEqual(install, { root: "notes", catalog_token: catalog.token, fingerprint: catalog.fingerprint })
        assert.strictEqual((yield* query(keyA, `PRAGMA journal_mode`))[0]!.journal_mode, "wal")
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("the reader connection is read-only", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const exit = yield* Effect.scoped(
          Effect.flatMap(Databases, (d) =>
            Effect.flatMap(d.activate(DatabaseKey.make(keyA)), (db) => Effect.exit(db.reader.unsafe(`INSERT INTO "Note" (id, title, done, count) VALUES ('x', 't', 0, 0)`)))
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        assert.strictEqual((yield* query(keyA, `SELECT count(*) AS n FROM "Note"`))[0]!.n, 0)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("concurrent activations of one key open it once", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const before = yield* counter(activations)
        const ids = yield* Effect.scoped(
          Effect.flatMap(Databases, (d) => Effect.all(Array.from({ length: 20 }, () => Effect.map(d.activate(DatabaseKey.make(keyA)), (db) => db.id)), { concurrency: "unbounded" }))
        )
        assert.deepStrictEqual(new Set(ids), new Set([databaseId(DatabaseKey.make(keyA))]))
        assert.strictEqual((yield* counter(activations)) - before, 1)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("keeps at most maxOpenDatabases, closing the least recently used idle one, never one in use", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const capacity = Metric.tagged(evictions, "reason", "capacity")
        const before = yield* counter(capacity)
        const [k1, k2, k3, k4] = ["k1", "k2", "k3", "k4"]
        yield* touch(k1!)
        yield* TestClock.adjust("1 second")
        yield* touch(k2!)
        yield* TestClock.adjust("1 second")
        yield* touch(k3!)
        assert.sameMembers(yield* openIds, [databaseId(DatabaseKey.make(k2!)), databaseId(DatabaseKey.make(k3!))])
        yield* TestClock.adjust("1 second")
        yield* touch(k2!)
        yield* TestClock.adjust("1 second")
        yield* touch(k4!)
        assert.sameMembers(yield* openIds, [databaseId(DatabaseKey.make(k2!)), databaseId(DatabaseKey.make(k4!))])
        assert.strictEqual((yield* counter(capacity)) - before, 2)

        // A database held by a caller stays open past the limit until released.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const held = yield* (yield* Databases).activate(DatabaseKey.make(k1!))
            yield* TestClock.adjust("1 second")
            yield* touch(k3!)
            yield* touch(k4!)
            assert.include(yield* openIds, held.id)
            yield* create("Still usable", k1!)
          })
        )
        assert.strictEqual((yield* openIds).length, 2)
        assert.deepStrictEqual((yield* query(k1!, `SELECT title FROM "Note"`)).map((r) => r.title), ["Still usable"])
      }).pipe(Effect.provide(storeLayer({ dataDir, maxOpenDatabases: 2 })))
    }))

  it.scoped("closes idle databases after the idle timeout; they reopen with their data", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const idle = Metric.tagged(evictions, "reason", "idle")
        const before = yield* counter(idle)
        const receipt = yield* create("Kept", keyA)
        assert.deepStrictEqual(yield* openIds, [databaseId(DatabaseKey.make(keyA))])
        yield* TestClock.adjust("30 seconds")
        assert.deepStrictEqual(yield* openIds, [databaseId(DatabaseKey.make(keyA))])
        yield* TestClock.adjust("2 minutes")
        assert.deepStrictEqual(yield* openIds, [])
        assert.strictEqual((yield* counter(idle)) - before, 1)
        const replay: Receipt = yield* Effect.flatMap(fullView, (view) =>
          mutate({ view, principal: principal("alice", keyA), request: request("Note", "create", { title: "Kept" }, { invocationId: receipt.invocationId }) })
        )
        assert.deepStrictEqual(replay, receipt)
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(1) })))
    }))
})

describe("catalog installation", () => {
  const evolved = (fields: Record<string, Schema.Schema.Any | Schema.PropertySignature.Any>, extra: { indexes?: ReadonlyArray<ReadonlyArray<string>>; entities?: ReadonlyArray<Entity.Entity<string, any>> } = {}) =>
    RootSchema.make("notes", {
      entities: [
        Entity.make("Note", { description: "A note with a counter.", fields: fields as Schema.Struct.Fields, indexes: extra.indexes ?? [["title"]] }),
        ...(extra.entities ?? [])
      ],
      operations: notes.operations
    })

  const activationFailure = (dataDir: string, root: RootSchema.RootSchema) =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(touch(keyA))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.instanceOf(error, ActivationError)
      const cause = (error as ActivationError).cause
      assert.instanceOf(cause, Install.IncompatibleCatalog)
      // A failed activation is not kept: the next caller tries again (and fails the same way).
      // Public callers never see it: the DataPlane answers an InternalError with a correlation id.
      const again = yield* Effect.exit(create("Never", keyA))
      const retried = Exit.isFailure(again) ? Option.getOrUndefined(Cause.failureOption(again.cause)) : undefined
      assert.instanceOf(retried, ActivationError)
      assert.instanceOf((retried as ActivationError).cause, Install.IncompatibleCatalog)
      return (cause as Install.IncompatibleCatalog).problems
    }).pipe(Effect.provide(storeLayer({ dataDir, root })))

  it.scoped("an incompatible catalog fails activation before touching data", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* create("Precious", keyA).pipe(Effect.provide(storeLayer({ dataDir })))
      const { title, done, count, tag } = Note.fields

      assert.deepStrictEqual(yield* activationFailure(dataDir, evolved({ title, done, count: Schema.String, tag })), [
        `refused (incompatible): field "Note.count" changed its stored type from integer to text; declare a migration that covers "Note.count"`
      ])
      assert.deepStrictEqual(yield* activationFailure(dataDir, evolved({ title, done, count })), [
        `refused (incompatible): field "Note.tag" was removed (or renamed); declare a migration that covers "Note.tag"`
      ])
      assert.deepStrictEqual(yield* activationFailure(dataDir, evolved({ title, done, count, tag: Schema.String })), [
        `refused (needs validation): field "Note.tag" became required: 1 stored row violates it`
      ])
      assert.deepStrictEqual(yield* activationFailure(dataDir, evolved({ title, done, count, tag, rank: Schema.Int })), [
        `refused (needs validation): field "Note.rank" is new and required (existing rows have no value): 1 stored row violates it`
      ])
      assert.deepStrictEqual(
        yield* activationFailure(dataDir, RootSchema.make("other", { entities: [Note], operations: notes.operations })),
        [`the database holds root schema "notes", the deployment serves "other"`]
      )

      // The original catalog still finds its data as it was.
      yield* Effect.gen(function* () {
        assert.deepStrictEqual((yield* query(keyA, `SELECT title, count FROM "Note"`)), [{ title: "Precious", count: 0 }])
        const catalog = yield* Effect.orDie(compile(notes))
        assert.strictEqual((yield* query(keyA, `SELECT catalog_token FROM _cairn_install`))[0]!.catalog_token, catalog.token)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("additive changes are applied: a new entity, a new optional field, a new index", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* create("Old", keyA).pipe(Effect.provide(storeLayer({ dataDir })))
      const Label = Entity.make("Label", { description: "A label.", fields: { name: Schema.String } })
      const root = evolved({ ...Note.fields, rank: Schema.optional(Schema.Int) }, { indexes: [["title"], ["rank"]], entities: [Label] })
      const catalog = yield* Effect.orDie(compile(root))
      yield* Effect.gen(function* () {
        const columns = (yield* query(keyA, `PRAGMA table_info("Note")`)).map((r) => r.name)
        assert.deepStrictEqual(columns, ["id", "title", "done", "count", "tag", "rank"])
        const indexes = (yield* query(keyA, `SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'ix_%' ORDER BY name`)).map((r) => r.name)
        assert.deepStrictEqual(indexes, ["ix_Note_rank", "ix_Note_title"])
        assert.strictEqual((yield* query(keyA, `SELECT count(*) AS n FROM "Label"`))[0]!.n, 0)
        assert.deepStrictEqual(yield* query(keyA, `SELECT title, rank FROM "Note"`), [{ title: "Old", rank: null }])
        assert.deepStrictEqual((yield* query(keyA, `SELECT catalog_token, fingerprint FROM _cairn_install`))[0], {
          catalog_token: catalog.token,
          fingerprint: catalog.fingerprint
        })
      }).pipe(Effect.provide(storeLayer({ dataDir, root })))
      assert.isTrue(existsSync(join(dataDir, "databases", `${databaseId(DatabaseKey.make(keyA))}.sqlite`)))
      // Dropping the index again is additive too; the data stays.
      yield* Effect.gen(function* () {
        const indexes = (yield* query(keyA, `SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'ix_%' ORDER BY name`)).map((r) => r.name)
        assert.deepStrictEqual(indexes, ["ix_Note_title"])
      }).pipe(Effect.provide(storeLayer({ dataDir, root: evolved({ ...Note.fields, rank: Schema.optional(Schema.Int) }, { entities: [Label] }) })))
    }))

  it.scoped("a database held by overlapping callers (cheap leases) stays open until the last leaves, then idles out", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const databases = yield* Databases
        const key = DatabaseKey.make(keyA)
        const id = databaseId(key)
        const before = yield* counter(activations)
        const first = yield* Scope.make()
        yield* Scope.extend(databases.activate(key), first)
        // Taken while the first caller holds it: the lease of an open database in use.
        const second = yield* Scope.make()
        yield* Scope.extend(databases.activate(key), second)
        const third = yield* Scope.make()
        yield* Scope.extend(databases.activate(key), third)
        yield* Scope.close(first, Exit.void)
        yield* Scope.close(third, Exit.void)
        // Longer than the idle timeout: a caller still holds it.
        yield* TestClock.adjust("5 minutes")
        assert.deepStrictEqual(yield* openIds, [id])
        assert.strictEqual(yield* databases.withDatabase(key, (db) => Effect.succeed(db.id)), id)
        yield* TestClock.adjust("5 minutes")
        assert.deepStrictEqual(yield* openIds, [id])
        yield* create("Held", keyA)
        yield* Scope.close(second, Exit.void)
        assert.deepStrictEqual(yield* openIds, [id])
        yield* TestClock.adjust("2 minutes")
        assert.deepStrictEqual(yield* openIds, [])
        assert.strictEqual((yield* counter(activations)) - before, 1)
        // `withDatabase` of a closed database activates it, and releases it when done.
        const titles = yield* databases.withDatabase(key, (db) => Effect.orDie(db.reader.unsafe<{ title: string }>(`SELECT title FROM "Note"`)))
        assert.deepStrictEqual(titles.map((r) => r.title), ["Held"])
        yield* TestClock.adjust("2 minutes")
        assert.deepStrictEqual(yield* openIds, [])
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(1) })))
    }))
})

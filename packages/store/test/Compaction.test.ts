import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Metric, TestClock } from "effect"
import { Compaction, Log } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { activate, compiledNotes, fullView, makeHandlers, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

const create = (title: string) => Effect.flatMap(fullView, (view) => mutate({ view, principal: principal(), request: request("Note", "create", { title }) }))

const compactedCount = Effect.map(Metric.value(Compaction.compactedCommits), (s) => s.count)

describe("Compaction", () => {
  it.scoped("each open database compacts its log on its own schedule, with no sync traffic at all", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        // Held open for the whole test: compaction is a job of the open database.
        const db = yield* activate("org-acme")
        const watermark = Effect.orDie(Log.watermark(db.reader))
        /** The job runs in its own fiber once the clock reaches it: let it finish. */
        const settled = (expected: number) =>
          Effect.gen(function* () {
            for (let i = 0; i < 1000 && (yield* watermark) < expected; i++) yield* Effect.yieldNow()
            return yield* watermark
          })
        const before = yield* compactedCount
        for (let i = 0; i < 5; i++) yield* create(`Note ${i}`)
        yield* TestClock.adjust("59 seconds")
        assert.strictEqual(yield* watermark, 0)

        yield* TestClock.adjust("1 second")
        assert.strictEqual(yield* settled(3), 3)
        const payloads = yield* Effect.orDie(db.reader.unsafe<{ changes: string }>(`SELECT changes FROM _cairn_commits ORDER BY position`))
        assert.deepStrictEqual(payloads.map((r) => r.changes === "[]"), [true, true, true, false, false])
        assert.strictEqual((yield* compactedCount) - before, 3)

        // The next round keeps the last two again.
        for (let i = 5; i < 8; i++) yield* create(`Note ${i}`)
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(yield* settled(6), 6)
        assert.strictEqual((yield* compactedCount) - before, 6)
        assert.strictEqual(yield* db.position, 8)
      }).pipe(Effect.provide(storeLayer({ dataDir, retainedCommits: 2, compactEvery: Duration.minutes(1) })))
    }))

  it.scoped("compacting now keeps the retained history and counts what it dropped", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const db = yield* activate("org-acme")
        assert.strictEqual(yield* db.compact, 0)
        for (let i = 0; i < 4; i++) yield* create(`Note ${i}`)
        assert.strictEqual(yield* db.compact, 1)
        assert.strictEqual(yield* db.compact, 0)
        assert.strictEqual(yield* Effect.orDie(Log.watermark(db.reader)), 1)
      }).pipe(Effect.provide(storeLayer({ dataDir, retainedCommits: 3 })))
    }))

  it("a store without a mutation guard does not build (there is no default guard)", () => {
    const withoutGuard = Databases.Default.pipe(
      Layer.provide(StoreConfig.layer({ dataDir: "unused" })),
      Layer.provide(Archive.local),
      Layer.provide(OperationCatalog.layer(compiledNotes, makeHandlers({ latch: undefined, explode: false })))
    )
    // @ts-expect-error MutationGuard is required: the layer still needs it.
    const built: Layer.Layer<Databases, unknown, never> = withoutGuard
    assert.isDefined(built)
  })
})

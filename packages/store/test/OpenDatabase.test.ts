import { rmSync } from "node:fs"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Metric, Option, TestClock } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { activations, ActivationError, Databases, databaseId } from "@cairn/store/Databases"
import { fullView, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

// Everything one open database has lives on its RcMap entry's value (`OpenDatabase`): once the
// entry has closed, the store holds nothing of it. Checked two ways: what `Databases` still tracks
// (entries, armed deadlines) and, as the oracle, whether its `Database` can be collected at all
// (which found a faulted database kept alive by its fault's captured stack frames).

const idOf = (key: string) => databaseId(DatabaseKey.make(key))
const openIds = Effect.flatMap(Databases, (d) => d.open)
const tracked = Effect.flatMap(Databases, (d) => d.tracked)
const create = (title: string, key: string) =>
  Effect.flatMap(fullView, (view) => mutate({ view, principal: principal("alice", key), request: request("Note", "create", { title }) }))
const activationCount = Effect.map(Metric.value(activations), (s) => s.count)
/** A turn of the event loop: what a fiber woken by the clock does next (closing a database) gets to run. */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
const settle = (done: Effect.Effect<boolean, never, Databases>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200 && !(yield* done); i++) yield* turn
    return yield* done
  })

/** Databases collected since they were watched (`watch`), by watch token. */
const finalized = new Set<symbol>()
const registry = new FinalizationRegistry<symbol>((token) => finalized.add(token))

/**
 * Watches the `Database` of `key` (taken in a scope that is closed again) for collection. A
 * `FinalizationRegistry`, not a `WeakRef`: a WeakRef keeps its target alive until the job that
 * made or read it ends, which a test's long-running effect may never reach.
 */
const watch = (key: string) =>
  Effect.scoped(
    Effect.flatMap(Databases, (d) =>
      Effect.map(d.activate(DatabaseKey.make(key)), (db) => {
        const token = Symbol(key)
        registry.register(db, token)
        return token
      })
    )
  )

/** Whether the watched database was collected by full collections (finalization callbacks run in later turns). */
const collected = (token: symbol) =>
  Effect.gen(function* () {
    setFlagsFromString("--expose-gc")
    // A full, synchronous collection (`gc({ type: "major" })` collected nothing here, on Node 20).
    const gc = runInNewContext("gc") as () => void
    for (let i = 0; i < 10 && !finalized.has(token); i++) {
      gc()
      yield* turn
    }
    return finalized.has(token)
  })

describe("OpenDatabase", () => {
  it.scoped("an idle-closed database leaves nothing behind; its next activation starts afresh", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("one", "k1")
        const first = yield* watch("k1")
        // Open and lingering: its entry, its linger and its compaction job.
        assert.deepStrictEqual(yield* tracked, { entries: 1, lingers: 1, idles: 0, compactions: 1 })
        yield* TestClock.adjust("2 seconds")
        assert.deepStrictEqual(yield* tracked, { entries: 1, lingers: 0, idles: 1, compactions: 1 })
        yield* TestClock.adjust("1 minute")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 0)))
        assert.deepStrictEqual(yield* tracked, { entries: 0, lingers: 0, idles: 0, compactions: 0 })
        assert.isTrue(yield* collected(first))

        const before = yield* activationCount
        const titles = yield* Effect.scoped(
          Effect.flatMap(Databases, (d) => Effect.flatMap(d.activate(DatabaseKey.make("k1")), (db) => db.values(`SELECT title FROM "Note"`, [])))
        )
        assert.deepStrictEqual(titles, [["one"]])
        assert.strictEqual((yield* activationCount) - before, 1)
        assert.deepStrictEqual(yield* tracked, { entries: 1, lingers: 1, idles: 0, compactions: 1 })
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(1), compactEvery: Duration.minutes(10) })))
    }))

  it.scoped("an evicted database leaves nothing behind; the one that stays keeps its own", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("one", "k1")
        const first = yield* watch("k1")
        yield* TestClock.adjust("2 seconds")
        yield* create("two", "k2")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 1)))
        assert.deepStrictEqual(yield* openIds, [idOf("k2")])
        // k1's idle deadline (armed when its linger passed) went with it.
        assert.deepStrictEqual(yield* tracked, { entries: 1, lingers: 1, idles: 0, compactions: 1 })
        assert.isTrue(yield* collected(first))
      }).pipe(Effect.provide(storeLayer({ dataDir, maxOpenDatabases: 1, idleTimeout: Duration.minutes(5), compactEvery: Duration.minutes(10) })))
    }))

  it.scoped("a storage fault outlives its database's entry: the id stays refused, and nothing else is kept", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("one", "k1")
        const first = yield* watch("k1")
        const file = join(dataDir, "databases", `${idOf("k1")}.sqlite`)
        for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
        yield* turn
        const refused = (exit: Exit.Exit<unknown, unknown>) =>
          Exit.isFailure(exit) && Option.exists(Cause.failureOption(exit.cause), (e) => e instanceof ActivationError && e.fault === "missing")
        const touch = Effect.exit(create("two", "k1"))
        assert.isTrue(refused(yield* touch))
        assert.isTrue(yield* settle(Effect.map(tracked, (t) => t.entries === 0)))
        assert.deepStrictEqual(yield* tracked, { entries: 0, lingers: 0, idles: 0, compactions: 0 })
        assert.isTrue(yield* collected(first))
        // Refused from the fault alone: no entry is made for it.
        assert.isTrue(refused(yield* touch))
        assert.deepStrictEqual(yield* tracked, { entries: 0, lingers: 0, idles: 0, compactions: 0 })
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(5) })))
    }))
})

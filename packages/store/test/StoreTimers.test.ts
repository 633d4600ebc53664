import { rmSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Exit, Layer, Metric, Option, Scope, TestClock } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Log } from "@cairn/store"
import { ActivationError, Databases, databaseId, evictions } from "@cairn/store/Databases"
import * as Connection from "../src/internal/connection.js"
import * as Deadlines from "../src/internal/deadlines.js"
import { fullView, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

const openIds = Effect.flatMap(Databases, (d) => d.open)
const idOf = (key: string) => databaseId(DatabaseKey.make(key))
const touch = (key: string) => Effect.scoped(Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(key))))
const create = (title: string, key: string) =>
  Effect.flatMap(fullView, (view) => mutate({ view, principal: principal("alice", key), request: request("Note", "create", { title }) }))
const idleCloses = Effect.map(Metric.value(Metric.tagged(evictions, "reason", "idle")), (s) => s.count)
/** What a fiber woken by the clock does next (closing a database) finishes within a few turns. */
const settle = (done: Effect.Effect<boolean, never, Databases>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200 && !(yield* done); i++) yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    return yield* done
  })

describe("store timers", () => {
  it.scoped("a deadline queue runs each key at its deadline, in order; re-arming moves a key, disarming drops it", () =>
    Effect.gen(function* () {
      const ran: Array<[string, number]> = []
      const queue = yield* Deadlines.make((key: string) => Effect.map(TestClock.currentTimeMillis, (now) => void ran.push([key, now])))
      queue.arm("a", 1_000)
      queue.arm("b", 2_000)
      queue.arm("c", 3_000)
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(ran, [])
      // "a" used again at 0.5 s: its deadline moves behind the others'.
      queue.arm("a", 3_500)
      queue.disarm("c")
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(ran, [["b", 2_000], ["a", 3_500]])
      // An empty queue waits for the next key.
      queue.arm("d", 6_000)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(ran.at(-1), ["d", 6_000])
    }))

  it.scoped("an idle database closes `idleTimeout` after its linger; a use in between starts both again", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const before = yield* idleCloses
        yield* create("one", "k1")
        yield* TestClock.adjust("10 seconds")
        yield* create("one", "k2")
        // Past k1's linger (trimmed, its shared reference kept): used again at 50 s.
        yield* TestClock.adjust("40 seconds")
        yield* touch("k1")
        // k2 closes at 10 + 1 + 60 s; k1, used at 50 s, at 111 s.
        yield* TestClock.adjust("25 seconds")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 1)))
        assert.deepStrictEqual(yield* openIds, [idOf("k1")])
        yield* TestClock.adjust("35 seconds")
        assert.deepStrictEqual(yield* openIds, [idOf("k1")])
        yield* TestClock.adjust("2 seconds")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 0)))
        assert.strictEqual((yield* idleCloses) - before, 2)
        // Reopened with its data.
        const titles = yield* Effect.scoped(
          Effect.flatMap(Databases, (d) => Effect.flatMap(d.activate(DatabaseKey.make("k1")), (db) => db.values(`SELECT title FROM "Note"`, [])))
        )
        assert.deepStrictEqual(titles, [["one"]])
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(1) })))
    }))

  it.scoped("a wall clock set back an hour delays no linger or idle close: the store's deadlines follow elapsed time", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const test = yield* TestClock.testClock()
      // The test clock's elapsed time, with a wall clock that an operator (or NTP) can set back.
      const wallBehind = { millis: 0 }
      const clock: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => test.unsafeCurrentTimeMillis() - wallBehind.millis,
        currentTimeMillis: Effect.sync(() => test.unsafeCurrentTimeMillis() - wallBehind.millis),
        unsafeCurrentTimeNanos: () => test.unsafeCurrentTimeNanos(),
        currentTimeNanos: test.currentTimeNanos,
        sleep: (duration) => test.sleep(duration)
      }
      // Adjusted through `test` itself: inside `withClock`, `TestClock.adjust` would find the wrapper.
      yield* Effect.gen(function* () {
        yield* create("one", "k1")
        wallBehind.millis = 3_600_000
        // Its linger (1 s) and idle timeout (60 s) pass on elapsed time, the wall clock an hour behind.
        yield* test.adjust("62 seconds")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 0)))
        yield* create("two", "k2")
        yield* test.adjust("2 seconds")
        wallBehind.millis = 7_200_000
        yield* test.adjust("60 seconds")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 0)))
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(1) })), Effect.withClock(clock))
    }))

  it.scoped("an idle database whose file goes away is refused and closed at once, not at its idle deadline", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("one", "k1")
        // Past its linger: idle, still open.
        yield* TestClock.adjust("2 seconds")
        assert.deepStrictEqual(yield* openIds, [idOf("k1")])
        const file = join(dataDir, "databases", `${idOf("k1")}.sqlite`)
        for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
        // A later turn of the event loop: the open file is checked again.
        yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        const exit = yield* Effect.exit(touch("k1"))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(error) && error.value instanceof ActivationError && error.value.fault === "missing")
        assert.isTrue(yield* settle(Effect.map(openIds, (ids) => ids.length === 0)))
      }).pipe(Effect.provide(storeLayer({ dataDir, idleTimeout: Duration.minutes(5) })))
    }))

  it.scoped("closing the store does not wait out a linger or an idle deadline", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(storeLayer({ dataDir }), scope)
      yield* Effect.provide(Effect.zipRight(create("one", "k1"), create("one", "k2")), context)
      yield* TestClock.adjust("2 seconds")
      yield* Effect.provide(touch("k2"), context)
      // k1 waits for its idle close, k2 for its linger: the clock never reaches either.
      yield* Scope.close(scope, Exit.void)
    }))

  it.scoped("each open database compacts on its own deadline; a closed one's job does not run", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const a = yield* Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make("k1")))
        for (let i = 0; i < 4; i++) yield* create(`Note ${i}`, "k1")
        yield* TestClock.adjust("30 seconds")
        const b = yield* Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make("k2")))
        for (let i = 0; i < 4; i++) yield* create(`Note ${i}`, "k2")
        const watermark = (db: typeof a) => Effect.orDie(Log.watermark(db.reader))
        const compacted = (db: typeof a) => settle(Effect.map(watermark(db), (w) => w === 2))
        yield* TestClock.adjust("30 seconds")
        assert.isTrue(yield* compacted(a))
        assert.strictEqual(yield* watermark(b), 0)
        yield* TestClock.adjust("30 seconds")
        assert.isTrue(yield* compacted(b))
      }).pipe(Effect.provide(storeLayer({ dataDir, retainedCommits: 2, compactEvery: Duration.minutes(1), idleTimeout: Duration.minutes(10) })))
    }))

  it.live("a lazy connection's @effect/sql face is built on first use and dropped once idle; a face in hand keeps working", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dataDir = yield* tempDir
        const filename = join(dataDir, "file.sqlite")
        const writer = yield* Connection.open({ filename })
        assert.isTrue(writer.faceBuilt())
        yield* Effect.orDie(writer.sql.unsafe(`CREATE TABLE t (v TEXT)`))
        yield* Effect.orDie(writer.sql.unsafe(`INSERT INTO t VALUES ('one')`))
        const reader = yield* Connection.open({ filename, readonly: true, lazy: { idleClose: Duration.seconds(30) } })
        // The hot path needs no face.
        assert.deepStrictEqual(yield* Effect.scoped(Effect.zipRight(reader.raw.lease, Effect.sync(() => reader.raw.values(`SELECT v FROM t`, [])))), [["one"]])
        assert.isFalse(reader.faceBuilt())
        const face = reader.sql
        assert.isTrue(reader.faceBuilt())
        assert.strictEqual(reader.sql, face)
        assert.deepStrictEqual(yield* Effect.orDie(face.unsafe<{ v: string }>(`SELECT v FROM t`)), [{ v: "one" }])
        // Idle (nothing holds it): trimmed, the face goes; the writer's stays.
        reader.raw.trim()
        writer.raw.trim()
        assert.isFalse(reader.faceBuilt())
        assert.isTrue(writer.faceBuilt())
        // Held by a caller, it keeps working; the next one asking gets a new face over the same connection.
        assert.deepStrictEqual(yield* Effect.orDie(face.unsafe<{ v: string }>(`SELECT v FROM t`)), [{ v: "one" }])
        assert.isFalse(reader.faceBuilt())
        const again = reader.sql
        assert.notStrictEqual(again, face)
        // Both faces share one permit: a transaction on one excludes the other's.
        const order: Array<string> = []
        yield* Effect.orDie(
          Effect.all(
            [
              again.withTransaction(Effect.zipRight(Effect.sync(() => order.push("begin")), Effect.zipRight(Effect.sleep("20 millis"), Effect.sync(() => order.push("end"))))),
              Effect.zipRight(Effect.sleep("5 millis"), face.withTransaction(Effect.sync(() => order.push("other"))))
            ],
            { concurrency: "unbounded" }
          )
        )
        assert.deepStrictEqual(order, ["begin", "end", "other"])
        // A transaction in progress keeps its face.
        yield* Effect.orDie(again.withTransaction(Effect.sync(() => {
          reader.raw.trim()
          assert.isTrue(reader.faceBuilt())
        })))
      }).pipe(Effect.provide(Reactivity.layer))
    ))
})

import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Metric } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Databases, openReaders } from "@cairn/store/Databases"
import * as Connection from "../src/internal/connection.js"
import { fullView, mutate, pause, principal, request, storeLayer, tempDir } from "./support/notes.js"

const until = (done: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500 && !done(); i++) yield* pause(10)
    return done()
  })

const readersOpen = Effect.map(Metric.value(openReaders), (s) => s.value)

describe("lazy read connection", () => {
  it.live("opened on demand, closed once idle, never while held; page reads need none", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dataDir = yield* tempDir
        yield* Effect.gen(function* () {
          const view = yield* fullView
          yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "one" }) })
          const databases = yield* Databases
          const db = yield* databases.activate(DatabaseKey.make("org-acme"))
          // Page reads run on the idle write connection: no read connection opens.
          assert.deepStrictEqual(yield* db.values(`SELECT title FROM "Note"`, []), [["one"]])
          assert.strictEqual(yield* readersOpen, 0)

          // A read transaction opens it and holds it past the idle time; its snapshot stays its own.
          const titles = Effect.map(Effect.orDie(db.reader.unsafe<{ title: string }>(`SELECT title FROM "Note" ORDER BY title`)), (r) => r.map((x) => x.title))
          const inside = yield* db.reader.withTransaction(
            Effect.gen(function* () {
              const first = yield* titles
              assert.strictEqual(yield* readersOpen, 1)
              yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "two" }) })
              yield* pause(100)
              assert.strictEqual(yield* readersOpen, 1)
              assert.deepStrictEqual(yield* db.values(`SELECT title FROM "Note" ORDER BY title`, []), [["one"], ["two"]])
              return [first, yield* titles]
            })
          ).pipe(Effect.orDie)
          assert.deepStrictEqual(inside, [["one"], ["one"]])
          // Unheld, it closes after the idle time, and opens again for the next read.
          assert.isTrue(yield* until(() => Effect.runSync(readersOpen) === 0))
          assert.deepStrictEqual(yield* titles, ["one", "two"])
          assert.strictEqual(yield* readersOpen, 1)
          assert.isTrue(yield* until(() => Effect.runSync(readersOpen) === 0))
        }).pipe(Effect.provide(storeLayer({ dataDir, readerIdleTimeout: Duration.millis(20) })))
        // Closing the store leaves no read connection behind.
        assert.strictEqual(yield* readersOpen, 0)
      })
    ))

  it.live("a read during a transaction on the write connection sees committed rows only", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const dataDir = yield* tempDir
        const filename = join(dataDir, "file.sqlite")
        const writer = yield* Connection.open({ filename })
        yield* Effect.orDie(writer.sql.unsafe(`CREATE TABLE t (v TEXT)`))
        yield* Effect.orDie(writer.sql.unsafe(`INSERT INTO t VALUES ('committed')`))
        let opened = 0
        const reader = yield* Connection.open({
          filename,
          readonly: true,
          lazy: { idleClose: Duration.seconds(30), onChange: (open) => void (opened += open ? 1 : 0) }
        })
        const read = Effect.orDie(Connection.committedValues(writer, reader, `SELECT v FROM t ORDER BY v`, []))
        assert.deepStrictEqual(yield* read, [["committed"]])
        assert.strictEqual(opened, 0)
        const during = yield* writer.sql.withTransaction(
          Effect.gen(function* () {
            yield* writer.sql.unsafe(`INSERT INTO t VALUES ('pending')`)
            return yield* read
          })
        ).pipe(Effect.orDie)
        assert.deepStrictEqual(during, [["committed"]])
        assert.strictEqual(opened, 1)
        assert.deepStrictEqual(yield* read, [["committed"], ["pending"]])
      }).pipe(Effect.provide(Reactivity.layer))
    ))
})

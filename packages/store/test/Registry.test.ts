import { createHash } from "node:crypto"
import { copyFileSync, existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Logger, Metric, Option } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Databases } from "@cairn/store/Databases"
import { ActivationError, databaseId } from "@cairn/store/Databases"
import { DataDirectoryLocked } from "@cairn/store/Registry"
import { mutate as mutateIn } from "@cairn/store/Mutate"
import { storageFaults } from "@cairn/store/StorageFault"
import { fullView, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

const keyA = "org-acme"
const fileOf = (dataDir: string, key: string) => join(dataDir, "databases", `${databaseId(DatabaseKey.make(key))}.sqlite`)

const create = (title: string, databaseKey = keyA) =>
  Effect.flatMap(fullView, (view) => mutate({ view, principal: principal("alice", databaseKey), request: request("Note", "create", { title }) }))

const digest = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex")

const activation = (key: string) =>
  Effect.scoped(Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(key)))).pipe(Effect.flip)

const faultCount = (kind: string) => Effect.map(Metric.value(Metric.tagged(storageFaults, "kind", kind)), (s) => s.count)

/** Log lines written while `effect` runs, as text. */
const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.map(Logger.logfmtLogger, (line) => lines.push(line))
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return { result, lines }
  })

describe("Registry", () => {
  it.scoped("a file older than the registered position is `rolled_back`: logged with id and kind, counted once, left alone", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const file = fileOf(dataDir, keyA)
      const backup = join(dataDir, "backup.sqlite")
      yield* create("one").pipe(Effect.provide(storeLayer({ dataDir })))
      copyFileSync(file, backup)
      // Closing records the last position in the registry.
      yield* Effect.all([create("two"), create("three")]).pipe(Effect.provide(storeLayer({ dataDir })))
      copyFileSync(backup, file)
      rmSync(file + "-wal", { force: true })
      const restored = digest(file)
      const before = yield* faultCount("rolled_back")
      const { result, lines } = yield* logged(
        Effect.gen(function* () {
          const first = yield* activation(keyA)
          const second = yield* activation(keyA)
          const other = yield* Effect.exit(create("elsewhere", "org-globex"))
          return { first, second, other }
        }).pipe(Effect.provide(storeLayer({ dataDir })))
      )
      assert.instanceOf(result.first, ActivationError)
      assert.strictEqual(result.first.fault, "rolled_back")
      assert.strictEqual(result.second.fault, "rolled_back")
      assert.isTrue(Exit.isSuccess(result.other), "another database keeps working")
      assert.strictEqual((yield* faultCount("rolled_back")) - before, 1)
      const line = lines.find((l) => l.includes("storage fault"))
      assert.isDefined(line, lines.join("\n"))
      assert.include(line!, `database=${databaseId(DatabaseKey.make(keyA))}`)
      assert.include(line!, "fault=rolled_back")
      assert.strictEqual(digest(file), restored, "the rolled-back file was written to")
    }))

  it.scoped("a file removed under an open database: the next group commit is refused (nothing acknowledged), then the database is `missing`", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const file = fileOf(dataDir, keyA)
      yield* Effect.gen(function* () {
        yield* create("before")
        const before = yield* faultCount("missing")
        const view = yield* fullView
        // Held across the removal, as a request that activated just before it would.
        const exit = yield* Effect.scoped(
          Effect.gen(function* () {
            const database = yield* Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(keyA)))
            for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
            return yield* Effect.exit(mutateIn({ view, principal: principal("alice", keyA), request: request("Note", "create", { title: "lost" }), database }))
          })
        )
        assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause), "a write into a removed file was acknowledged")
        assert.strictEqual((yield* faultCount("missing")) - before, 1)
        assert.strictEqual((yield* activation(keyA)).fault, "missing")
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("a file removed between two requests: the next one (a later turn of the event loop) is refused as `missing`, and nothing is recreated", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const file = fileOf(dataDir, keyA)
      yield* Effect.gen(function* () {
        yield* create("before")
        const before = yield* faultCount("missing")
        // Held open across the removal (by a reader, say), so the next request finds it open.
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(keyA)))
            for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
            yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
            assert.strictEqual((yield* activation(keyA)).fault, "missing")
          })
        )
        assert.strictEqual((yield* faultCount("missing")) - before, 1)
        assert.isFalse(existsSync(file), "the removed file was recreated")
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("integrity_check on demand: ok for a healthy file", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const report = yield* Effect.gen(function* () {
        yield* create("one")
        return yield* Effect.flatMap(Databases, (d) => d.check(DatabaseKey.make(keyA)))
      }).pipe(Effect.provide(storeLayer({ dataDir })))
      assert.deepStrictEqual(report, { ok: true, problems: [] })
    }))

  it.scoped("a data directory is held by one store at a time: a second one fails naming it, the first keeps writing", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        yield* create("one")
        const second = yield* Effect.exit(Layer.build(storeLayer({ dataDir })).pipe(Effect.scoped))
        assert.isTrue(Exit.isFailure(second))
        const error = Option.getOrThrow(Cause.failureOption(Exit.isFailure(second) ? second.cause : Cause.empty))
        assert.instanceOf(error, DataDirectoryLocked)
        assert.include(error.message, `another Cairn process is using ${dataDir}`)
        yield* create("two")
      }).pipe(Effect.provide(storeLayer({ dataDir })))
      // Released with the first store's scope.
      yield* create("three").pipe(Effect.provide(storeLayer({ dataDir })))
    }))
})

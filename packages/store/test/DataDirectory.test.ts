import { copyFileSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { ActivationError, databaseId } from "@cairn/store/Databases"
import { DataDirectoryRefused, identityFile } from "@cairn/store/DataDirectory"
import { fullView, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

const fileOf = (dataDir: string, key: string) => join(dataDir, "databases", `${databaseId(DatabaseKey.make(key))}.sqlite`)

const create = (title: string, databaseKey = "org-acme", invocationId?: string) =>
  Effect.flatMap(fullView, (view) =>
    mutate({ view, principal: principal("alice", databaseKey), request: request("Note", "create", { title }, invocationId ? { invocationId } : {}) })
  )

/** Starts the store on `dataDir` for `effect`, closing it afterwards. */
const withStore = <A, E, R>(dataDir: string, effect: Effect.Effect<A, E, R>, options: { readonly acceptLostRegistry?: boolean } = {}) =>
  Effect.scoped(Effect.flatMap(Layer.build(storeLayer({ dataDir, ...options })), (context) => Effect.provide(effect, context)))

const refusal = <A, E>(exit: Exit.Exit<A, E>) => {
  assert.isTrue(Exit.isFailure(exit))
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  assert.isTrue(Option.isSome(failure) && failure.value instanceof DataDirectoryRefused, String(exit))
  return (failure as Option.Some<DataDirectoryRefused>).value
}

describe("DataDirectory", () => {
  it.scoped("a used directory whose registry is emptied refuses to start, naming what to do; restored files or the override start it", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* withStore(dataDir, create("first"))
      const identity = readFileSync(join(dataDir, identityFile), "utf8")
      const registry = join(dataDir, "registry.sqlite")
      const saved = join(dataDir, "registry.saved")
      copyFileSync(registry, saved)

      // Emptied (truncated), and deleted: refused either way, and again on the next try.
      writeFileSync(registry, "")
      const emptied = refusal(yield* Effect.exit(withStore(dataDir, Effect.void)))
      assert.strictEqual(emptied.reason, "registry_lost")
      assert.include(emptied.message, `the data directory ${dataDir} was used before`)
      assert.include(emptied.message, "Restore registry.sqlite and databases/ together from a backup")
      assert.include(emptied.message, "CAIRN_ACCEPT_LOST_REGISTRY=true")
      rmSync(registry)
      assert.strictEqual(refusal(yield* Effect.exit(withStore(dataDir, Effect.void))).reason, "registry_lost")
      assert.strictEqual(readFileSync(join(dataDir, identityFile), "utf8"), identity)

      // The registry put back: it starts, and the database is the same one (its file, verified).
      copyFileSync(saved, registry)
      yield* withStore(dataDir, create("second"))

      // Emptied of its databases, its identity kept: lost all the same.
      const emptiedRows = new Database(registry)
      emptiedRows.exec("DELETE FROM cairn_databases")
      emptiedRows.close()
      assert.strictEqual(refusal(yield* Effect.exit(withStore(dataDir, Effect.void))).reason, "registry_lost")
      copyFileSync(saved, registry)
      yield* withStore(dataDir, create("third"))

      // The explicit override starts it: the file left is adopted as this directory's.
      rmSync(registry)
      yield* withStore(dataDir, create("fourth"), { acceptLostRegistry: true })
      yield* withStore(dataDir, create("fifth"))
    })
  )

  it.scoped("another directory's registry is refused; another directory's database file is never adopted", () =>
    Effect.gen(function* () {
      const mine = yield* tempDir
      const theirs = yield* tempDir
      yield* withStore(mine, create("mine"))
      yield* withStore(theirs, create("theirs", "org-globex"))

      // Their registry copied over mine.
      const saved = join(mine, "registry.saved")
      copyFileSync(join(mine, "registry.sqlite"), saved)
      copyFileSync(join(theirs, "registry.sqlite"), join(mine, "registry.sqlite"))
      const foreign = refusal(yield* Effect.exit(withStore(mine, Effect.void)))
      assert.strictEqual(foreign.reason, "registry_foreign")
      assert.include(foreign.message, "belongs to another data directory")
      copyFileSync(saved, join(mine, "registry.sqlite"))

      // Their database file copied in (my registry does not know it): a `foreign` storage fault, never adopted.
      copyFileSync(fileOf(theirs, "org-globex"), fileOf(mine, "org-globex"))
      const copied = readFileSync(fileOf(mine, "org-globex"))
      const exit = yield* Effect.exit(withStore(mine, create("into theirs", "org-globex")))
      assert.isTrue(Exit.isFailure(exit))
      const squashed = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(squashed, ActivationError)
      assert.strictEqual((squashed as ActivationError).fault, "foreign")
      assert.include((squashed as ActivationError).message, "made by another data directory")
      assert.isTrue(readFileSync(fileOf(mine, "org-globex")).equals(copied))
      // Mine keeps working.
      yield* withStore(mine, create("still mine"))
    })
  )
})

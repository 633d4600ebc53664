/**
 * The operator's per-database actions, defined once over the store and reached from every way an
 * operator comes in (the operator listener in embedded mode, `cairn doctor` / `cairn restore`):
 * list every database with its state, check a file's integrity off the request path, clear a
 * storage fault once its file is repaired, and restore one database from backups online. Each acts
 * on one database; every other one keeps serving throughout.
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { Clock, Data, Effect, Option } from "effect"
import type { ClearFaultResult, DatabaseListing, IntegrityResult, RestoreRequest, RestoreResult } from "@cairn/domain/DatabaseAdmin"
import { type DatabaseId } from "@cairn/domain/Ids"
import * as Backup from "./Backup.js"
import { Databases } from "./Databases.js"
import { fault } from "./internal/fileFaults.js"
import { inWorker } from "./internal/pageCheck.js"
import { ObjectStore } from "./ObjectStore.js"
import { OperationCatalog } from "./OperationCatalog.js"
import { Registry } from "./Registry.js"
import * as Restore from "./Restore.js"
import { StoreConfig } from "./StoreConfig.js"

/** Operator-facing: why an action was not done (nothing was changed). */
export class AdminRefused extends Data.TaggedError("AdminRefused")<{ readonly message: string }> {}

const fileName = /^([A-Za-z0-9_-]+)\.sqlite$/

const bytesOf = (file: string): number | null => {
  const main = statSync(file, { throwIfNoEntry: false })
  if (main === undefined) return null
  return main.size + (statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0)
}

export class DatabaseAdmin extends Effect.Service<DatabaseAdmin>()("@cairn/store/DatabaseAdmin", {
  effect: Effect.gen(function* () {
    const databases = yield* Databases
    const registry = yield* Registry
    const { dataDir } = yield* StoreConfig
    const { catalog } = yield* OperationCatalog
    const objects = yield* Effect.serviceOption(ObjectStore)
    const directory = join(dataDir, "databases")
    const fileOf = (id: string) => join(directory, `${id}.sqlite`)

    /** Registered databases, and files in the directory the registry does not name (listed too: the operator decides). */
    const ids = Effect.map(registry.all, (registered) => {
      const known = new Map(registered.map((r) => [r.id, r.position] as const))
      const files = existsSync(directory) ? readdirSync(directory) : []
      for (const name of files) {
        const id = fileName.exec(name)?.[1]
        if (id !== undefined && !known.has(id)) known.set(id, 0)
      }
      return known
    })

    const describe = (id: string, position: number): Effect.Effect<DatabaseListing> =>
      Effect.gen(function* () {
        const state = yield* databases.state(id as DatabaseId)
        const objectBytes = Option.isNone(objects)
          ? null
          : yield* objects.value.list(id).pipe(
              Effect.map((blobs) => blobs.reduce((n, b) => n + b.size, 0)),
              Effect.orElseSucceed(() => null)
            )
        return {
          id,
          position,
          fileBytes: bytesOf(fileOf(id)),
          objectBytes,
          state: state.held !== undefined ? "held" : state.fault !== undefined ? "faulted" : state.open ? "open" : "idle",
          fault: state.fault === undefined ? null : { kind: state.fault.kind, detail: state.fault.detail }
        } as const
      })

    /** Every database of the data directory, by creation. */
    const list: Effect.Effect<ReadonlyArray<DatabaseListing>> = Effect.flatMap(ids, (known) =>
      Effect.forEach([...known], ([id, position]) => describe(id, position))
    )

    const known = (id: string) =>
      Effect.flatMap(ids, (all) =>
        all.has(id) ? Effect.succeed(all.get(id)!) : Effect.fail(new AdminRefused({ message: `no database ${id} in ${dataDir}` }))
      )

    /**
     * `PRAGMA integrity_check` of one file on a worker thread (its own read-only connection): never
     * on the event loop, never holding its writer. Problems record a `corrupt` storage fault: the
     * database is refused until repaired, restored or cleared.
     */
    const check = (id: string): Effect.Effect<IntegrityResult, AdminRefused> =>
      Effect.gen(function* () {
        yield* known(id)
        const file = fileOf(id)
        if (!existsSync(file)) return { id, ok: false, problems: ["its file does not exist"], position: 0 }
        // A file SQLite cannot open at all is one problem.
        const { position, problems } = yield* inWorker(file, "integrity_check(10)").pipe(
          Effect.catchAll((failed) => Effect.succeed({ problems: [failed.message], position: 0 }))
        )
        const ok = problems.length === 0
        if (!ok) yield* databases.faulted(fault(id as DatabaseId, "corrupt", `integrity_check: ${problems.slice(0, 3).join("; ")}`))
        return { id, ok, problems, position }
      })

    /** Forgets the fault of `id`, then opens it as a call would: serving again, or still refused and why. */
    const clearFault = (id: string): Effect.Effect<ClearFaultResult, AdminRefused> =>
      Effect.gen(function* () {
        yield* known(id)
        const cleared = yield* databases.clearFault(id as DatabaseId)
        const probe = yield* Effect.either(databases.probe(id as DatabaseId))
        const problem =
          probe._tag === "Right"
            ? null
            : probe.left.held !== undefined
              ? `it is ${probe.left.held} by an operator`
              : probe.left.message
        yield* Effect.logWarning(probe._tag === "Right" ? "storage fault cleared: the database serves again" : "storage fault cleared, but the database is still refused").pipe(
          Effect.annotateLogs({ database: id, cleared: cleared?.kind ?? "none", ...(problem !== null ? { problem } : {}) })
        )
        return { id, cleared: cleared?.kind ?? null, serving: probe._tag === "Right", problem }
      })

    /**
     * Restores `id` from backups while the server runs: its calls are refused retryably (503) from now,
     * the ones in flight finish, it closes, the restored file takes its place (the old one moved aside),
     * its fault is cleared, and its calls are taken again. Every other database keeps serving.
     */
    const restore = (request: RestoreRequest): Effect.Effect<RestoreResult, AdminRefused> =>
      Effect.gen(function* () {
        const id = request.id as DatabaseId
        const started = yield* Clock.currentTimeMillis
        const restored = yield* Effect.scoped(
          Effect.gen(function* () {
            yield* databases.hold(id, "being restored")
            const done = yield* Restore.restore({
              from: request.from,
              dataDir,
              databaseId: id,
              deploymentId: yield* Backup.deploymentIdOf(dataDir),
              catalog,
              to: request.to,
              log: request.log,
              force: true,
              registry
            })
            yield* databases.clearFault(id)
            return done
          })
        ).pipe(
          Effect.catchTags({
            ActivationError: (e) => Effect.fail(new AdminRefused({ message: `database ${request.id} is ${e.held ?? "busy"} by another operator's action; nothing was changed` })),
            RestoreRefused: (e) => Effect.fail(new AdminRefused({ message: e.message })),
            RestoreError: (e) => Effect.fail(new AdminRefused({ message: e.message }))
          })
        )
        const unavailableMillis = (yield* Clock.currentTimeMillis) - started
        yield* Effect.logWarning("database restored online").pipe(
          Effect.annotateLogs({ database: id, position: restored.position, replayed: restored.replayed, unavailableMillis })
        )
        return {
          id: request.id,
          position: restored.position,
          backupPosition: restored.manifest.position,
          replayed: restored.replayed,
          replaced: restored.replaced ?? null,
          unavailableMillis
        }
      })
    return { list, check, clearFault, restore } as const
  })
}) {}

/**
 * `npm run bench -- footprint`: memory per open tenant database. Opens `FOOTPRINT_DATABASES`
 * (200) databases through the store (each activated, one committed `Project.create` and one
 * indexed read through `Database.values`, then left open: idle, not closed), and measures the
 * growth of RSS and of the V8 heap (after full collections) against a baseline taken once
 * the store, the modules and one database were warm. Prints
 * `footprint: kib_per_open_db=<rss growth per database> (heap=<n> rss=<n>) databases=<n> cache_kib=<n>
 * second_half_kib_per_db=<n> (heap=<n>)`: the last, the growth over the second half of the databases
 * alone (the marginal cost of one more open database, without the warm baseline's own swing).
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString, writeHeapSnapshot } from "node:v8"
import { fileURLToPath } from "node:url"
import { runInNewContext } from "node:vm"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { v7 as uuidv7 } from "uuid"
import { compile } from "@cairn/catalog/Catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig, storeDefaults } from "@cairn/store/StoreConfig"
import { tracker } from "@cairn/tracker/tracker"
import { trackerHandlers } from "@cairn/tracker/handlers"

const DATABASES = Number(process.env.FOOTPRINT_DATABASES ?? 200)

const catalog = Effect.runSync(compile(tracker))
const view = View.full(catalog)

const gc = (): (() => void) => {
  setFlagsFromString("--expose-gc")
  const collect = runInNewContext("gc") as (options?: { readonly type: "major" }) => void
  return () => {
    for (let i = 0; i < 3; i++) collect({ type: "major" })
  }
}

/**
 * Past the store's linger (an idle database gives back its page cache 1 s after its last use):
 * every database measured is idle, as the bench describes it, whenever it was touched. Before,
 * the databases of the last half second were still in use at the measurement, and during the
 * second half the first half's went idle, which made the second half's growth look smaller.
 */
const idle = () => new Promise((resolve) => setTimeout(resolve, 1_500))

/** One tenant: activated, one write, one read; the database stays open afterwards (idle). */
const touch = (n: number) =>
  Effect.gen(function* () {
    const principal = new Principal({ subject: `user-${n}`, roles: [], scopes: [], claims: {}, databaseKey: DatabaseKey.make(`tenant-${n}`) })
    const databases = yield* Databases
    yield* databases.withDatabase(principal.databaseKey, (database) =>
      Effect.gen(function* () {
        yield* mutate({
          view,
          principal,
          database,
          request: { operation: operationRef("Project", "create"), input: { name: `Project ${n}` }, invocationId: InvocationId.make(uuidv7()) }
        })
        const rows = yield* database.values(`SELECT "id", "name" FROM "Project" WHERE "name" = ?`, [`Project ${n}`])
        if (rows.length !== 1) return yield* Effect.dieMessage("read missed the write")
      })
    )
  })

const measure = async (): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-footprint-"))
  const collect = gc()
  // Every database stays open for the whole measurement.
  const config = { ...storeDefaults, dataDir: dir, maxOpenDatabases: DATABASES + 10 }
  const runtime = ManagedRuntime.make(
    Databases.Default.pipe(
      Layer.provide(StoreConfig.layer(config)),
      Layer.provide(Archive.local),
      Layer.provide(OperationCatalog.layer(catalog, trackerHandlers)),
      Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void })),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  try {
    // Warm: modules, the store, JIT; one database open (not counted).
    await runtime.runPromise(touch(-1))
    await idle()
    collect()
    const before = process.memoryUsage()
    // FOOTPRINT_HEAPSNAPSHOT=<dir>: heap snapshots before and after, to diff what each database retains.
    const snapshots = process.env.FOOTPRINT_HEAPSNAPSHOT
    if (snapshots) writeHeapSnapshot(join(snapshots, "footprint-before.heapsnapshot"))
    // Half, then the rest: the second half's growth is the marginal cost of one more open database,
    // free of what the warm baseline itself held (its RSS swings by ~14 MiB between processes).
    const half = Math.floor(DATABASES / 2)
    for (let n = 0; n < half; n++) await runtime.runPromise(touch(n))
    await idle()
    collect()
    const middle = process.memoryUsage()
    for (let n = half; n < DATABASES; n++) await runtime.runPromise(touch(n))
    // Idle, and what the activations left behind (timers, finalization of spent statements) settled.
    await idle()
    collect()
    const after = process.memoryUsage()
    if (snapshots) writeHeapSnapshot(join(snapshots, "footprint-after.heapsnapshot"))
    const open = (await runtime.runPromise(Effect.flatMap(Databases, (d) => d.open))).length
    if (open < DATABASES) throw new Error(`only ${open} databases stayed open`)
    const kib = (bytes: number) => (bytes / 1024 / DATABASES).toFixed(0)
    const rss = after.rss - before.rss
    const heap = after.heapUsed - before.heapUsed
    const marginal = (bytes: number) => (bytes / 1024 / (DATABASES - half)).toFixed(0)
    console.log(
      `footprint: kib_per_open_db=${kib(rss)} (heap=${kib(heap)} rss=${kib(rss)}) databases=${DATABASES} ` +
        `external=${kib(after.external - before.external)} cache_kib=${config.sqliteCacheKib} ` +
        `second_half_kib_per_db=${marginal(after.rss - middle.rss)} (heap=${marginal(after.heapUsed - middle.heapUsed)})`
    )
  } finally {
    await runtime.dispose()
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * Measured in a fresh process: memory another benchmark left in this one (freed but still
 * resident, or collected during the measurement) would hide or fake the growth.
 */
export const run = async (): Promise<void> => {
  const child = spawnSync(process.execPath, ["--conditions=@cairn/source", "--import", "tsx", fileURLToPath(import.meta.url)], {
    env: { ...process.env, FOOTPRINT_CHILD: "1" },
    stdio: "inherit"
  })
  if (child.status !== 0) throw new Error(`the footprint measurement exited with ${child.status ?? child.signal}`)
}

if (process.env.FOOTPRINT_CHILD === "1") await measure()

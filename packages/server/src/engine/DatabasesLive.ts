/**
 * The deployment's databases: files under the data directory the settings name, the
 * deployment's operations and handlers, and its policy as the writer's mutation guard.
 * The guard is part of this layer, so no assembly of the engine can leave it out.
 */
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig, storeConfig } from "@cairn/store/StoreConfig"
import { Effect, Layer } from "effect"
import { Deployment } from "./Deployment.js"
import { PolicyGuardLive } from "./PolicyGuard.js"
import { Settings } from "../operations/Settings.js"

/** The store's settings (`CAIRN_SQLITE_*`, `CAIRN_WRITER_*`, ...), in the data directory the server settings name. */
export const StoreConfigLive = Layer.effect(
  StoreConfig,
  Effect.gen(function* () {
    const settings = yield* Settings
    return { ...(yield* storeConfig), dataDir: settings.dataDir }
  })
)

/** The deployment's operations and handlers, as the store runs them. */
export const OperationCatalogLive = Layer.effect(OperationCatalog, Effect.map(Deployment, (d) => d.operations))

/**
 * The store over an explicit archive: `Archive.local` (embedded, the default: nothing leaves the
 * machine) or a cluster's (see `@cairn/cluster/archive/PgArchive`).
 */
export const databasesWith = <E, R>(archive: Layer.Layer<Archive, E, R>) =>
  Databases.Default.pipe(
    Layer.provide(StoreConfigLive),
    Layer.provide(OperationCatalogLive),
    Layer.provide(PolicyGuardLive),
    Layer.provide(archive)
  )

/** Embedded: the local file is the database. */
export const DatabasesLive = Databases.Default.pipe(
  Layer.provide(Archive.local),
  Layer.provide(StoreConfigLive),
  Layer.provide(Layer.effect(OperationCatalog, Effect.map(Deployment, (d) => d.operations))),
  Layer.provide(PolicyGuardLive)
)

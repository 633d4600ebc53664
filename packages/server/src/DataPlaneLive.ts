/**
 * The engine behind `DataPlane`, as every transport uses it: describe over the
 * principal's policy view, queries through the planner on the caller's database read
 * connection, mutations through that database's single writer (guarded by policy).
 * `EngineLive` assembles it with the store, the planner and their settings.
 */
import { Sealer, DescribeLimits, describe } from "@cairn/catalog"
import { QueryLimits, QueryPlanner } from "@cairn/query"
import { activateForRequest, Databases, mutate, OperationCatalog, StoreConfig, storeConfig } from "@cairn/store"
import { Effect, Layer } from "effect"
import { DataPlane } from "./DataPlane.js"
import { Deployment } from "./Deployment.js"
import { DiscoveryLimitsLive } from "./ExposureGuard.js"
import { PolicyGuardLive } from "./PolicyGuard.js"
import { Settings } from "./Settings.js"

/** `DataPlane` over the deployment's policy, its databases and the query planner. */
export const DataPlaneLive = Layer.effect(
  DataPlane,
  Effect.gen(function* () {
    const { policy } = yield* Deployment
    // Captured once: the engine's calls run with the settings it was built with.
    const context = yield* Effect.context<Databases | QueryPlanner | Sealer>()
    const planner = yield* QueryPlanner
    const queryLimits = yield* QueryLimits
    const describeLimits = yield* DescribeLimits
    return DataPlane.of({
      describe: (principal, request) =>
        describe(policy.view(principal), request).pipe(
          Effect.provideService(DescribeLimits, describeLimits),
          Effect.provide(context)
        ),
      query: (principal, request) =>
        Effect.scoped(
          Effect.flatMap(activateForRequest(principal.databaseKey), (database) =>
            planner.run({ view: policy.view(principal), principal, database: { id: database.id, sql: database.reader }, request })
          )
        ).pipe(Effect.provideService(QueryLimits, queryLimits), Effect.provide(context)),
      mutate: (principal, request) => mutate({ view: policy.view(principal), principal, request }).pipe(Effect.provide(context))
    })
  })
)

/** The store's settings, in the data directory the server settings name. */
const StoreConfigLive = Layer.effect(
  StoreConfig,
  Effect.gen(function* () {
    const settings = yield* Settings
    return { ...(yield* storeConfig), dataDir: settings.dataDir }
  })
)

/** The deployment's databases: its operations and handlers, guarded by its policy. */
export const DatabasesLive = Databases.Default.pipe(
  Layer.provide(StoreConfigLive),
  Layer.provide(Layer.effect(OperationCatalog, Effect.map(Deployment, (d) => d.operations))),
  Layer.provide(PolicyGuardLive)
)

/**
 * `DataPlane` with everything behind it, configured from the environment (`CAIRN_SQLITE_*`,
 * `CAIRN_QUERY_*`, `CAIRN_DISCOVERY_*`, ...). Also exposes `Databases` and the limits, for
 * sync. Needs `Deployment`, `Settings` and `Sealer`.
 */
export const EngineLive = DataPlaneLive.pipe(
  Layer.provideMerge(QueryPlanner.Default),
  Layer.provideMerge(Layer.mergeAll(DatabasesLive, QueryLimits.layerConfig, DiscoveryLimitsLive))
)

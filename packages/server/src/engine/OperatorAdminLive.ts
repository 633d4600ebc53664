/**
 * The operator's per-database actions (`OperatorAdmin`, served on the operator listener) as the
 * store defines them once (`DatabaseAdmin`), over the very databases the engine serves: the layers
 * are the engine's own (`DatabasesLive`, shared within one build), so a fault cleared or a database
 * held here is the one every call sees.
 */
import { DatabaseAdmin } from "@cairn/store/DatabaseAdmin"
import { Registry } from "@cairn/store/Registry"
import { Effect, Layer } from "effect"
import { OperatorAdmin } from "../operations/OperatorAdmin.js"
import { DatabasesLive, OperationCatalogLive, StoreConfigLive } from "./DatabasesLive.js"
import { ObjectStoreLive } from "./ObjectStoreLive.js"

export const DatabaseAdminLive = DatabaseAdmin.Default.pipe(
  Layer.provide(DatabasesLive),
  Layer.provide(ObjectStoreLive),
  Layer.provide(Registry.Default),
  Layer.provide(StoreConfigLive),
  Layer.provide(OperationCatalogLive)
)

export const OperatorAdminLive = Layer.effect(
  OperatorAdmin,
  Effect.map(DatabaseAdmin, (admin) => ({
    list: admin.list,
    check: admin.check,
    clearFault: admin.clearFault,
    restore: admin.restore
  }))
).pipe(Layer.provide(DatabaseAdminLive))

/**
 * The engine's budgets as the operator set them: query planning and decoding
 * (`CAIRN_QUERY_*`), discovery (`CAIRN_DISCOVERY_*`) and synchronization (`CAIRN_SYNC_*`).
 * The engine requires each of them; nothing falls back to a default the operator never saw.
 */
import { DescribeLimits } from "@cairn/catalog/Describe"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { SyncConfig } from "@cairn/sync/SyncConfig"
import { Layer } from "effect"

export const EngineLimitsLive = Layer.mergeAll(QueryLimits.layerConfig, DescribeLimits.layerConfig, SyncConfig.layerConfig)

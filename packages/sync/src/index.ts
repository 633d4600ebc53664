export * from "./Sync.js"
export * from "./SyncConfig.js"
export * as SyncCursor from "./SyncCursor.js"
export * as SyncMetrics from "./SyncMetrics.js"

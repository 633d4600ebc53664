/**
 * `@cairn/client/node`: the sync client and its local SQLite store (`@effect/sql-sqlite-node`, better-sqlite3),
 * kept out of the root entry so a browser bundle never reaches Node modules. Install the optional peers
 * `@effect/sql`, `@effect/experimental` and `@effect/sql-sqlite-node` to use it.
 */
export * as SyncClient from "./SyncClient.js"
export * as SyncStore from "./SyncStore.js"
export * as SyncLoop from "./SyncLoop.js"

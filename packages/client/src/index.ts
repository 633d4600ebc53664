/**
 * `@cairn/client`: the typed data plane over HTTP, the generated bindings' runtime, and the browser
 * sync client (IndexedDB, one leading tab). This entry is browser-safe (fetch, IndexedDB, Web Locks);
 * the Node sync client and its local SQLite store are in `@cairn/client/node`, with `SyncLoop`
 * (the protocol loop, whose RPC client types need Node's type definitions).
 */
export * as CairnClient from "./CairnClient.js"
export * as TransportError from "./TransportError.js"
export * as InvocationId from "./InvocationId.js"
export * as Bindings from "./Bindings.js"
export * as LocalStore from "./LocalStore.js"
export * as IndexedDbStore from "./IndexedDbStore.js"
export * as BrowserSyncClient from "./BrowserSyncClient.js"

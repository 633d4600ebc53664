/**
 * `@cairn/client`: the typed data plane over HTTP and the generated bindings' runtime. This entry is
 * browser-safe (fetch only); the sync client and its local SQLite store are Node-only: `@cairn/client/node`.
 */
export * as CairnClient from "./CairnClient.js"
export * as TransportError from "./TransportError.js"
export * as InvocationId from "./InvocationId.js"
export * as Bindings from "./Bindings.js"

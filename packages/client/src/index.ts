export * from "./CairnClient.js"
export * from "./TransportError.js"
export * from "./InvocationId.js"
export * from "./Bindings.js"

export * from "./tracker.js"
export * from "./synthetic.js"
export * from "./policy.js"
export * from "./handlers.js"

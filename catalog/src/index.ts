export * from "./tracker.js"
export * from "./synthetic.js"

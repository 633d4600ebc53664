export * as tracker from "./tracker.js"
export * as policy from "./policy.js"
export * as handlers from "./handlers.js"
export * as application from "./application.js"

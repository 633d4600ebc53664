export * as freePort from "./freePort.js"

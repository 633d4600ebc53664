export * from "./freePort.js"

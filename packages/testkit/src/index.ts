export * as freePort from "./freePort.js"
export * as Wire from "./Wire.js"
export * as snapshotCursor from "./snapshotCursor.js"

export * as Layout from "./Layout.js"
export * as Position from "./Position.js"

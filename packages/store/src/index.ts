export * as Layout from "./Layout.js"

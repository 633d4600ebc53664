export * from "./QueryLimits.js"
export * from "./QueryPlanner.js"
export * from "./ScopeSql.js"
export * from "./QueryRequestDecoder.js"

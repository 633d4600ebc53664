export * as DevAuthServer from "./DevAuthServer.js"
export * from "./DevIdentity.js"
export * from "./DevIssuer.js"

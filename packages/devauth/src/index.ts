export * as DevAuthServer from "./DevAuthServer.js"
export * as DevIdentity from "./DevIdentity.js"
export * as DevIssuer from "./DevIssuer.js"
export * as DevToken from "./DevToken.js"

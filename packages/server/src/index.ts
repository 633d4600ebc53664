export * from "./Deployment.js"
export * from "./Health.js"
export * from "./Server.js"
export * from "./Settings.js"

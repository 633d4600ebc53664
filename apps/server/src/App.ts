/**
 * The whole server for one deployment, as `npm start` runs it and as the end-to-end
 * tests start it: the HTTP front (`/health`, `/db/*`, `/mcp` and its discovery, test
 * hooks where allowed) over the one engine, the bearer gate, and (from `@cairn/devauth`)
 * the development issuer and authorization server unless an external issuer is configured. The exposure guard runs
 * first: a public deployment without its required settings never binds.
 */
import { BearerGate } from "@cairn/server/BearerGate"
import { SealerLive } from "@cairn/server/DeploymentSecret"
import { DataPlane } from "@cairn/server/DataPlane"
import { DbRoutes } from "@cairn/server/DbRoutes"
import { Deployment, type DeploymentDefinition } from "@cairn/server/Deployment"
import { EngineLimitsLive } from "@cairn/server/EngineLimits"
import { FrontMiddleware } from "@cairn/server/FrontMiddleware"
import { IdentityLive } from "@cairn/server/IdentityLive"
import { Limits } from "@cairn/server/Limits"
import { serve } from "@cairn/server/Server"
import { TestHookRoutes, TestHooks } from "@cairn/server/TestHooks"
import { DevAuthServer } from "@cairn/devauth"
import { DevFallbackIssuer } from "@cairn/devauth/DevIdentity"
import { ExposureGuardLive } from "@cairn/server/ExposureGuard"
import { McpRoutesLive } from "@cairn/mcp/McpRoutes"
import { ObjectRoutes } from "@cairn/server/ObjectRoutes"
import { Layer } from "effect"

/** The engine every route calls, with the operator's budgets. */
export const Engine = DataPlane.Default.pipe(Layer.provide(EngineLimitsLive))

/** Needs `Settings`; everything else comes from the definition and the `CAIRN_*` environment. */
export const App = (definition: DeploymentDefinition) =>
  Layer.mergeAll(
    serve(Layer.mergeAll(FrontMiddleware, DbRoutes, ObjectRoutes, McpRoutesLive, TestHookRoutes)).pipe(
      Layer.provide([Engine, BearerGate.Default, Limits.layerConfig, TestHooks.Default]),
      Layer.provide(IdentityLive),
      Layer.provide(DevFallbackIssuer)
    ),
    DevAuthServer.DevAuthServerLive
  ).pipe(Layer.provide(ExposureGuardLive), Layer.provide(SealerLive), Layer.provide(Deployment.layer(definition)))

/**
 * The whole server for one deployment, as `npm start` runs it and as the end-to-end
 * tests start it: the HTTP front (`/health`, `/db/*`, `/mcp` and its discovery, test
 * hooks where allowed) over the one engine, the bearer gate, and (from `@cairn/devauth`)
 * the development issuer and authorization server unless an external issuer is configured. The exposure guard runs
 * first: a public deployment without its required settings never binds.
 */
import { BearerGate } from "@cairn/server/http/BearerGate"
import { CatalogGuardLive } from "@cairn/server/engine/CatalogGuard"
import { SealerLive } from "@cairn/server/auth/DeploymentSecret"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { DatabasesLive } from "@cairn/server/engine/DatabasesLive"
import { DatabaseRouter, type Placement } from "@cairn/server/engine/DatabaseRouter"
import { DbRoutes } from "@cairn/server/http/DbRoutes"
import { Deployment, type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { EngineLimitsLive } from "@cairn/server/engine/EngineLimits"
import { FrontMiddleware } from "@cairn/server/http/FrontMiddleware"
import { IdentityLive } from "@cairn/server/auth/IdentityLive"
import { Limits } from "@cairn/server/http/Limits"
import { type Settings } from "@cairn/server/operations/Settings"
import { serve } from "@cairn/server/http/Server"
import { TestHookRoutes, TestHooks } from "@cairn/server/operations/TestHooks"
import { DevAuthServer } from "@cairn/devauth"
import { DevFallbackIssuer } from "@cairn/devauth/DevIdentity"
import { ExposureGuardLive } from "@cairn/server/auth/ExposureGuard"
import { McpRoutesLive } from "@cairn/mcp/McpRoutes"
import { MetricsEndpointLive } from "@cairn/server/operations/MetricsEndpoint"
import { MetricFamiliesLive } from "@cairn/server/engine/MetricsAtZero"
import { OperatorAdminLive } from "@cairn/server/engine/OperatorAdminLive"
import { OperatorSettings } from "@cairn/server/operations/OperatorSettings"
import { ReadinessRoute } from "@cairn/server/http/Readiness"
import { TracingLive } from "@cairn/server/operations/Tracing"
import { type ConfigError, Effect, Layer } from "effect"
import { type HttpLayerRouter } from "@effect/platform"
import { ObjectRoutes } from "@cairn/server/http/ObjectRoutes"

/** The engine every route calls, with the operator's budgets; its placement (a `DatabaseRouter`) is the role's. */
export const Engine = DataPlane.Default.pipe(Layer.provide(EngineLimitsLive))

/** The embedded default: every database of the deployment runs in this one process. */
export const embedded: Placement = (engine) => engine.pipe(Layer.provide([DatabaseRouter.local, DatabasesLive]))

/** `/mcp` and its discovery documents, unless the operator switched MCP off (`CAIRN_MCP=off`: then 404). */
const McpIfOn = Layer.unwrapEffect(Effect.map(OperatorSettings, (settings) => (settings.mcp ? McpRoutesLive : Layer.empty)))

/**
 * Needs `Settings`; `pages` are extra static routes (the demo page); `place` is the role's
 * placement of the engine (`embedded` by default; the cluster roles' come from `@cairn/cluster/Roles`).
 * Everything else comes from the definition and the `CAIRN_*` environment.
 */
export const App = (
  definition: DeploymentDefinition,
  pages: Layer.Layer<never, ConfigError.ConfigError, Settings | HttpLayerRouter.HttpRouter> = Layer.empty,
  place: Placement = embedded
) =>
  Layer.mergeAll(
    serve(Layer.mergeAll(FrontMiddleware, DbRoutes, ObjectRoutes, McpIfOn, TestHookRoutes, ReadinessRoute, pages)).pipe(
      Layer.provide([place(Engine), BearerGate.Default, Limits.layerConfig, TestHooks.Default]),
      Layer.provide(IdentityLive),
      Layer.provide(DevFallbackIssuer)
    ),
    DevAuthServer.DevAuthServerLive,
    // Embedded, the operator listener also serves the per-database actions (`cairn doctor`, online `cairn restore`).
    MetricsEndpointLive.pipe(Layer.provide([MetricFamiliesLive, place === embedded ? OperatorAdminLive : Layer.empty]))
  ).pipe(
    Layer.provide(CatalogGuardLive),
    Layer.provide(ExposureGuardLive),
    Layer.provide(SealerLive),
    Layer.provide(Deployment.layer(definition)),
    // Built first, so every fiber the deployment starts uses the operator's tracer.
    Layer.provide(TracingLive),
    Layer.provideMerge(OperatorSettings.layerConfig)
  )

/**
 * The whole server for one deployment, as `npm start` runs it and as the end-to-end
 * tests start it: the HTTP front (`/health`, `/db/rpc`, `/db/sync`, `/mcp` and its
 * discovery, test hooks where allowed) over the one engine, identity, and the development
 * authorization server unless an external issuer is configured. The exposure guard runs
 * first: a public deployment without its required settings never binds.
 */
import {
  SealerLive,
  DbSyncRoutes,
  Deployment,
  type DeploymentDefinition,
  EngineLive,
  FrontMiddleware,
  IdentityLive,
  Limits,
  RpcRoutes,
  serve,
  TestHookRoutes
} from "@cairn/server"
import { DevAuthServerLive } from "@cairn/server/DevAuthServer"
import { ExposureGuardLive } from "@cairn/server/ExposureGuard"
import { McpRoutesLive } from "@cairn/mcp"
import { Layer } from "effect"

/** Needs `Settings`; everything else comes from the definition and the `CAIRN_*` environment. */
export const App = (definition: DeploymentDefinition) =>
  Layer.mergeAll(
    serve(Layer.mergeAll(FrontMiddleware, RpcRoutes, DbSyncRoutes, McpRoutesLive, TestHookRoutes)).pipe(
      Layer.provide([EngineLive, IdentityLive, Limits.layerConfig])
    ),
    DevAuthServerLive
  ).pipe(Layer.provide(ExposureGuardLive), Layer.provide(SealerLive), Layer.provide(Deployment.layer(definition)))

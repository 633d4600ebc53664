/**
 * Serving a deployment as `npm start` and `cairn serve` do: every setting checked at once,
 * then the whole `App` until SIGINT or SIGTERM. Settings problems are listed together on
 * stderr (exit 2); any other failure to start is one line (exit 1). The role (`CAIRN_ROLE`,
 * or `cairn serve --role`) picks the engine's placement; only a cluster role loads
 * `@cairn/cluster` (and with it `@effect/cluster` and `pg`), by a dynamic import.
 */
import { ConfigProvider, type ConfigError, Console, Effect, Layer, Option } from "effect"
import { type HttpLayerRouter } from "@effect/platform"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { type Role, roleSettingsConfig } from "@cairn/server/operations/RoleSettings"
import { Settings } from "@cairn/server/operations/Settings"
import { launch } from "@cairn/server/Startup"
import { App } from "./App.js"

/** The app for the configured role: embedded as it always was, or a cluster role's placement. */
const AppForRole = (definition: DeploymentDefinition, pages?: Layer.Layer<never, ConfigError.ConfigError, Settings | HttpLayerRouter.HttpRouter>) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const { cluster, role } = yield* roleSettingsConfig
      if (role === "embedded" || Option.isNone(cluster)) return App(definition, pages)
      const Roles = yield* Effect.promise(() => import("@cairn/cluster/Roles"))
      yield* Effect.logInfo(`Cairn role: ${role}`)
      return App(definition, pages, Roles.placement(role, cluster.value))
    })
  )

export const serveDeployment = (
  definition: DeploymentDefinition,
  pages?: Layer.Layer<never, ConfigError.ConfigError, Settings | HttpLayerRouter.HttpRouter>,
  options: { readonly role?: Role } = {}
): Effect.Effect<void> => {
  const started = launch(AppForRole(definition, pages).pipe(Layer.provide(Settings.layerConfig))).pipe(
    Effect.catchTag("StartupFailed", (failed) => Effect.zipRight(Console.error(failed.message), Effect.sync(() => process.exit(failed.exitCode))))
  )
  const role = options.role
  // `--role` wins over `CAIRN_ROLE`; every other setting is read as before.
  return role === undefined
    ? started
    : Effect.configProviderWith((current) =>
        Effect.withConfigProvider(started, ConfigProvider.fromMap(new Map([["CAIRN_ROLE", role]])).pipe(ConfigProvider.orElse(() => current)))
      )
}

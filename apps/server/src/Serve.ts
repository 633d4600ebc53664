/**
 * Serving a deployment as `npm start` and `cairn serve` do: every setting checked at once,
 * then the whole `App` until SIGINT or SIGTERM. Settings problems are listed together on
 * stderr (exit 2); any other failure to start is one line (exit 1).
 */
import { type ConfigError, Console, Effect, Layer } from "effect"
import { type HttpLayerRouter } from "@effect/platform"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { Settings } from "@cairn/server/operations/Settings"
import { launch } from "@cairn/server/Startup"
import { App } from "./App.js"

export const serveDeployment = (definition: DeploymentDefinition, pages?: Layer.Layer<never, ConfigError.ConfigError, Settings | HttpLayerRouter.HttpRouter>): Effect.Effect<void> =>
  launch(App(definition, pages).pipe(Layer.provide(Settings.layerConfig))).pipe(
    Effect.catchTag("StartupFailed", (failed) =>
      Effect.zipRight(Console.error(failed.message), Effect.sync(() => process.exit(failed.exitCode)))
    )
  )

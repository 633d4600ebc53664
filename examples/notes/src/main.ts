/** Serves the notes example with the same `App` as the tracker: `npm start -w @cairn/example-notes`. */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { Settings } from "@cairn/server/operations/Settings"
import { launch } from "@cairn/server/Startup"
import { App } from "@cairn/server-app/App"
import { notesDeployment } from "./application.js"

launch(App(notesDeployment).pipe(Layer.provide(Settings.layerConfig))).pipe(
  Effect.catchTag("StartupFailed", (failed) => Effect.zipRight(Console.error(failed.message), Effect.sync(() => process.exit(failed.exitCode)))),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)

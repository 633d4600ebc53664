/**
 * Cairn's entry point: the tracker deployment (root schema `tracker`, its policy and
 * handlers, one database per verified `org`), served until SIGINT or SIGTERM. Settings
 * problems are listed together on stderr (exit 2); any other failure to start is one line (exit 1).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { Settings } from "@cairn/server/Settings"
import { launch } from "@cairn/server/Startup"
import { trackerDeployment } from "@cairn/tracker/application"
import { App } from "./App.js"

launch(App(trackerDeployment).pipe(Layer.provide(Settings.layerConfig))).pipe(
  Effect.catchTag("StartupFailed", (failed) =>
    Effect.zipRight(Console.error(failed.message), Effect.sync(() => process.exit(failed.exitCode)))
  ),
  // The logger is the operator's choice (CAIRN_LOG_FORMAT), installed by `launch`.
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)

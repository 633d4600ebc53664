/**
 * Cairn's entry point: the tracker deployment (root schema `tracker`, its policy and
 * handlers, one database per verified `org`), served until SIGINT or SIGTERM.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { Settings } from "@cairn/server/Settings"
import { trackerDeployment } from "@cairn/tracker/application"
import { App } from "./App.js"

Layer.launch(App(trackerDeployment).pipe(Layer.provide(Settings.layerConfig))).pipe(NodeRuntime.runMain)

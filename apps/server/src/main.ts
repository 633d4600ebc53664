/**
 * Cairn's entry point: assembles the deployment from the named root schema `tracker`
 * and its database deployment, then serves it until SIGINT or SIGTERM.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { Deployment, serve, Settings } from "@cairn/server"
import { tracker } from "@cairn/tracker"

const DeploymentLive = Deployment.layer({
  root: tracker,
  databases: [{ name: "tenants", schema: "tracker", keyClaim: "org" }]
})

const Main = serve(Layer.empty).pipe(Layer.provide(DeploymentLive), Layer.provide(Settings.layerConfig))

Layer.launch(Main).pipe(NodeRuntime.runMain)

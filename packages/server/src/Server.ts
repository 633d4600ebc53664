/**
 * The HTTP front: NodeHttpServer + HttpLayerRouter, serving every route layer the
 * deployment assembles. Logs one line with the public URL once listening.
 */
import { createServer } from "node:http"
import { HttpLayerRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { Deployment } from "./Deployment.js"
import { HealthRoute } from "./Health.js"
import { Settings } from "./Settings.js"

/** Routes every deployment serves, whatever else it adds. */
export const CoreRoutes = Layer.mergeAll(HealthRoute)

/** Logs the one startup line, after the listener is bound. */
const announce = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* Settings
    const server = yield* HttpServer.HttpServer
    const bound = server.address._tag === "TcpAddress" ? `${server.address.hostname}:${server.address.port}` : "unix socket"
    const deployment = yield* Effect.serviceOption(Deployment)
    const app = Option.match(deployment, {
      onNone: () => "",
      onSome: (d) => `; app ${d.root.name}; databases: ${d.databases.map((db) => `${db.name} by ${db.keyClaim}`).join(", ")}`
    })
    yield* Effect.logInfo(`Cairn listening on ${settings.baseUrl} (bound ${bound}; stage ${settings.stageSetting}${app})`)
  })
)

/** Serves `routes` on the configured host and port. */
export const serve = <E, R>(routes: Layer.Layer<never, E, R>) =>
  Layer.merge(HttpLayerRouter.serve(Layer.mergeAll(CoreRoutes, routes), { disableListenLog: true, disableLogger: true }), announce).pipe(
    Layer.provideMerge(
      Layer.unwrapEffect(
        Effect.map(Settings, (s) => NodeHttpServer.layer(createServer, { port: s.port, host: s.host }))
      )
    )
  )

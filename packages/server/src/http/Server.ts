/**
 * The HTTP front: NodeHttpServer + HttpLayerRouter, serving every route layer the
 * deployment assembles. Logs one line with the public URL once listening.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { HttpLayerRouter, HttpMiddleware, HttpServer } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option, Runtime } from "effect"
import { Deployment } from "../engine/Deployment.js"
import { HealthRoute } from "./Health.js"
import { OperatorSettings } from "../operations/OperatorSettings.js"
import { Settings } from "../operations/Settings.js"

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

/**
 * How much more of a refused body is read and discarded while its refusal is written, and for
 * how long: a client sending up to this much more than it may still reads its answer; beyond
 * either bound its connection is reset.
 */
const DRAIN_BYTES = 16 << 20
const DRAIN_MS = 5_000

/**
 * The platform destroys a request whose body crosses the size limit mid-stream, which drops
 * the connection before the 413 is written (a client still sending sees a hang-up). Instead,
 * the rest of that body is read and discarded (bounded) while the answer goes out, and the
 * connection closes after it. The same holds for any answer written before its request's body
 * has arrived (a 413 on the declared length, a 401, a 504 on a trickling body): Node would
 * otherwise keep the connection alive and read the whole rest of the body, however large or
 * slow, before the next request (measured: 50 MB of a declared 10 GB read after the 413).
 */
const answerBeforeClosing = (req: IncomingMessage, res: ServerResponse) => {
  const destroy = req.destroy.bind(req)
  let draining = false
  const drain = (error?: Error) => {
    if (draining) return
    draining = true
    let drained = 0
    const stop = () => {
      clearTimeout(timer)
      if (!req.complete) destroy(error)
    }
    const timer = setTimeout(stop, DRAIN_MS)
    req.on("data", (chunk: Buffer | string) => {
      drained += chunk.length
      if (drained > DRAIN_BYTES) stop()
    })
    res.shouldKeepAlive = false
    // A lingering close (RFC 9112 §9.6): once the answer is out, Node destroys the socket of a
    // connection that closes, and a client still sending gets a reset instead of the answer (fetch
    // reports "other side closed"). The socket is only half-closed then, and destroyed once the
    // body has ended or the bounds above are met.
    const socket = req.socket
    const destroySoon = socket.destroySoon
    socket.destroySoon = function (this: typeof socket) {
      if (req.complete) return destroySoon.call(this)
      this.end()
      req.once("end", () => this.destroy())
    }
    req.once("end", () => clearTimeout(timer))
    req.resume()
  }
  req.destroy = ((error?: Error) => {
    req.destroy = destroy
    if (req.complete || req.destroyed || res.writableFinished) return destroy(error)
    drain(error)
    return req
  }) as typeof req.destroy
  const writeHead = res.writeHead
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse["writeHead"]>) {
    // Before the head is stored, so that it says `Connection: close`.
    if (!req.complete && !req.destroyed) drain()
    return writeHead.apply(this, args)
  } as ServerResponse["writeHead"]
}

const createFrontServer = (runtime: Runtime.Runtime<never>) => () => {
  const server = createServer()
  server.prependListener("request", answerBeforeClosing)
  // Before it listens, the platform answers a failure to bind; after, an 'error' (a failed accept)
  // would be unheard and exit the process: it is logged instead.
  server.on("error", (error) => {
    if (server.listening) Runtime.runFork(runtime)(Effect.logError("the HTTP listener failed", error))
  })
  return server
}

/**
 * The platform's own per-request span (URL, every header as an attribute, trace headers
 * parsed) is only made when a trace exporter is configured (`CAIRN_OTLP_ENDPOINT`); otherwise
 * `http.front` is the request's root span and nothing is exported anyway.
 */
const platformSpans = <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  Layer.unwrapEffect(
    Effect.map(Effect.serviceOption(OperatorSettings), (operator) =>
      Option.isSome(operator) && Option.isNone(operator.value.otlpEndpoint) ? HttpMiddleware.withTracerDisabledWhen(layer, () => true) : layer
    )
  )

/** Serves `routes` on the configured host and port. */
export const serve = <E, R>(routes: Layer.Layer<never, E, R>) =>
  Layer.merge(platformSpans(HttpLayerRouter.serve(Layer.mergeAll(CoreRoutes, routes), { disableListenLog: true, disableLogger: true })), announce).pipe(
    Layer.provideMerge(
      Layer.unwrapEffect(
        Effect.zipWith(Settings, Effect.runtime<never>(), (s, runtime) => NodeHttpServer.layer(createFrontServer(runtime), { port: s.port, host: s.host }))
      )
    )
  )

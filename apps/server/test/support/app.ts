// The whole server as `npm start` assembles it (`App(trackerDeployment)`), started in
// process on free 127.0.0.1 ports with a fresh data directory, the development
// authorization server, and test hooks on. Tokens are minted exactly as
// `npm run -s token` mints them: signed with the development key in the data directory.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { CairnClient } from "@cairn/client/CairnClient"
import { devIssuer, type DevIssuerShape, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { freePort } from "@cairn/testkit/freePort"
import { trackerDeployment } from "@cairn/tracker/application"
import { Writer } from "@cairn/store"
import { ConfigProvider, Effect, Layer, Logger, LogLevel } from "effect"
import { App } from "../../src/App.js"

export interface Who {
  readonly sub: string
  /** The database key claim; omit it to mint a token the server must refuse. */
  readonly org?: string
  readonly roles?: ReadonlyArray<string>
  readonly scope?: string
  readonly resource?: "db" | "mcp"
  readonly ttlSeconds?: number
}

export interface Running {
  readonly base: string
  readonly port: number
  readonly issuer: string
  readonly dataDir: string
  /** The development issuer and its signing key: for forging tokens the server must refuse. */
  readonly dev: DevIssuerShape
  /** A development access token, as `npm run -s token` prints it. */
  readonly token: (who: Who) => Effect.Effect<string>
  /** A `CairnClient` layer for `base` with this bearer token. */
  readonly client: (token: string) => Layer.Layer<CairnClient>
  /** Runs a generated-binding call as the holder of `token`. */
  readonly as: (token: string) => <A, E, R>(call: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, CairnClient>>
}

export interface StartOptions {
  /** Extra `CAIRN_*` settings, e.g. `CAIRN_MAX_BODY_BYTES`. */
  readonly env?: Readonly<Record<string, string>>
  /** Reuse a data directory. */
  readonly dataDir?: string
  /** Start again where a stopped server ran: its data directory, port and issuer URL. */
  readonly restartOf?: Running
  /** The deployment to serve; the tracker by default. */
  readonly deployment?: DeploymentDefinition
  /** Extra routes, e.g. the demo page (`DemoPage`) that `npm start` serves. */
  readonly pages?: Parameters<typeof App>[1]
  /** Run by each writer group while it holds the write connection, before its transaction (`Writer.GroupPause`). */
  readonly writerPause?: Effect.Effect<void>
  /** Least severe log level printed; `Warning` by default, to keep test output readable. */
  readonly logLevel?: LogLevel.LogLevel
  /** Replaces the default logger (e.g. to capture the lines a test reads). */
  readonly logger?: Logger.Logger<unknown, void>
}

/** Starts the server for the current scope; it stops (databases closed) when the scope closes. */
export const startApp = (options: StartOptions = {}) =>
  Effect.gen(function* () {
    const previous = options.restartOf
    const port = previous?.port ?? (yield* freePort())
    const base = `http://127.0.0.1:${port}`
    const issuer = previous?.issuer ?? `http://127.0.0.1:${yield* freePort()}`
    const dataDir = previous?.dataDir ?? options.dataDir ?? mkdtempSync(join(tmpdir(), "cairn-app-"))
    const settings = onLoopback({ port, dataDir, testHooks: "1" })
    const env = new Map<string, string>([
      ["CAIRN_DEV_ISSUER_URL", issuer],
      ["CAIRN_SQLITE_SYNCHRONOUS", "NORMAL"],
      ...Object.entries(options.env ?? {})
    ])
    const provided = (layer: Layer.Layer<never, unknown, Settings>) =>
      layer.pipe(
        Layer.provide(Settings.layer(settings)),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env))),
        Layer.provide(Logger.minimumLogLevel(options.logLevel ?? LogLevel.Warning)),
        Layer.provide(options.logger === undefined ? Layer.empty : Logger.replace(Logger.defaultLogger, options.logger)),
        Layer.provide(options.writerPause ? Layer.succeed(Writer.GroupPause, options.writerPause) : Layer.empty)
      )
    yield* Layer.build(provided(App(options.deployment ?? trackerDeployment, options.pages)))

    const dev = yield* devIssuer.pipe(
      Effect.provideService(Settings, settings),
      Effect.withConfigProvider(ConfigProvider.fromMap(env)),
      Effect.orDie
    )
    const token: Running["token"] = (who) =>
      signDevToken(dev, {
        subject: who.sub,
        audience: `${base}/${who.resource ?? "db"}`,
        claims: { ...(who.org !== undefined ? { org: who.org } : {}), ...(who.roles ? { roles: who.roles } : {}) },
        scope: who.scope ?? accessScopes.join(" "),
        ttlSeconds: who.ttlSeconds ?? 3600
      })
    const client: Running["client"] = (bearer) => CairnClient.layerFetch({ baseUrl: base, token: bearer })
    const as: Running["as"] = (bearer) => (call) => Effect.provide(call, client(bearer))
    const running: Running = { base, port, issuer, dataDir, dev, token, client, as }
    return running
  })

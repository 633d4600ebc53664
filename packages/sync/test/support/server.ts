/**
 * A real HTTP front for sync tests on 127.0.0.1: `/db/sync` behind a gate that verifies
 * jose-signed ES256 bearer tokens (subject, org claim as the database key, roles), the
 * way the `/db` front authenticates. Tokens are minted with the matching private key.
 */
import { createServer } from "node:http"
import { HttpLayerRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { RpcSerialization, RpcServer } from "@effect/rpc"
import type { View } from "@cairn/catalog/View"
import { Authentication } from "@cairn/domain/Authentication"
import { CurrentPrincipal } from "@cairn/domain/CurrentPrincipal"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { SyncRpcs } from "@cairn/domain/SyncRpcs"
import { Databases } from "@cairn/store/Databases"
import { Sync } from "@cairn/sync/Sync"
import { type Context, Effect, Layer, Option, Stream } from "effect"
import { type CryptoKey, generateKeyPair, jwtVerify, SignJWT } from "jose"
import { type EngineOptions, engineLayer } from "./harness.js"
import { ORG, tracker } from "./tracker.js"

const issuer = "https://issuer.test"
const audience = "cairn-sync-tests"

export interface Keys {
  readonly privateKey: CryptoKey
  readonly publicKey: CryptoKey
}

export const keys: Effect.Effect<Keys> = Effect.promise(() => generateKeyPair("ES256"))

export interface TokenOptions {
  readonly roles?: ReadonlyArray<string>
  readonly org?: string
}

export const mint = (k: Keys, subject: string, options: TokenOptions = {}) =>
  Effect.promise(() =>
    new SignJWT({ org: options.org ?? ORG, roles: [...(options.roles ?? [])] })
      .setProtectedHeader({ alg: "ES256" })
      .setSubject(subject)
      .setIssuer(issuer)
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(k.privateKey)
  )

const verify = (k: Keys, token: string) =>
  Effect.tryPromise(async () => {
    const { payload } = await jwtVerify(token, k.publicKey, { issuer, audience, algorithms: ["ES256"] })
    if (typeof payload.sub !== "string" || typeof payload["org"] !== "string") throw new Error("claims")
    return new Principal({
      subject: payload.sub,
      roles: Array.isArray(payload["roles"]) ? payload["roles"].map(String) : [],
      claims: payload,
      scopes: [],
      databaseKey: DatabaseKey.make(payload["org"])
    })
  })

/** Verifies the bearer token before the RPC layer; 401 without a valid one. */
const gate = (k: Keys) =>
  HttpLayerRouter.middleware(
    Effect.succeed((httpEffect) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const token = /^Bearer +(\S+)$/i.exec(request.headers["authorization"] ?? "")?.[1]
        const principal = token === undefined ? undefined : yield* Effect.option(verify(k, token)).pipe(Effect.map(Option.getOrUndefined))
        if (principal === undefined) {
          return HttpServerResponse.unsafeJson({ error: "invalid_token" }, { status: 401, headers: { "www-authenticate": "Bearer" } })
        }
        return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal)
      })
    )
  )

const AuthenticationLive = Layer.succeed(
  Authentication,
  Authentication.of(() =>
    Effect.flatMap(Effect.serviceOption(CurrentPrincipal), Option.match({ onNone: () => Effect.dieMessage("no principal"), onSome: Effect.succeed }))
  )
)

const ServedSyncRpcs = SyncRpcs.middleware(Authentication)

/**
 * The sync engine straight over the protocol, without the deployment's `DataPlane`: the
 * harness for the engine's own HTTP behaviour (streaming, resume, crash). The served
 * route is `SyncRoutes` in `@cairn/server`, tested end to end through the real App.
 */
const engineHandlers = (view: (principal: Principal) => View) =>
  ServedSyncRpcs.toLayer(
    Effect.gen(function* () {
      const sync = yield* Sync
      const databases = yield* Databases
      const open = (principal: Principal) => Effect.orDie(databases.activate(principal.databaseKey))
      return ServedSyncRpcs.of({
        SyncSnapshot: (request) =>
          Effect.scoped(
            Effect.gen(function* () {
              const principal = yield* CurrentPrincipal
              return yield* sync.snapshot(principal, view(principal), yield* open(principal), request)
            })
          ),
        SyncChanges: (request) =>
          Stream.unwrapScoped(
            Effect.gen(function* () {
              const principal = yield* CurrentPrincipal
              return sync.changes(principal, view(principal), yield* open(principal), request)
            })
          )
      })
    })
  )

const engineRoutes = RpcServer.layerHttpRouter({
  group: ServedSyncRpcs,
  path: "/db/sync",
  protocol: "http",
  disableFatalDefects: true
}).pipe(Layer.provide(RpcSerialization.layerNdjson))

export interface SyncServer {
  readonly url: string
  readonly keys: Keys
  readonly token: (subject: string, options?: TokenOptions) => Effect.Effect<string>
  /** The server's own store and engine, for writes and oracle reads (one writer per file). */
  readonly engine: Context.Context<Databases | Sync>
}

/** Serves `/db/sync` over the store in `dataDir` for the life of the scope. */
export const startServer = (dataDir: string, config: EngineOptions = {}) =>
  Effect.gen(function* () {
    const k = yield* keys
    const { policy } = yield* tracker
    const routes = engineRoutes.pipe(
      Layer.provide(engineHandlers((principal) => policy.view(principal))),
      Layer.provide([AuthenticationLive, gate(k).layer])
    )
    const engine = yield* Layer.build(engineLayer(dataDir, config))
    const app = HttpLayerRouter.serve(routes, { disableListenLog: true, disableLogger: true }).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.succeedContext(engine))
    )
    const context = yield* Layer.build(app)
    const server = yield* Effect.provide(HttpServer.HttpServer, context)
    const address = server.address as HttpServer.TcpAddress
    const server_: SyncServer = {
      url: `http://127.0.0.1:${address.port}/db/sync`,
      keys: k,
      token: (subject, options) => mint(k, subject, options),
      engine
    }
    return server_
  })

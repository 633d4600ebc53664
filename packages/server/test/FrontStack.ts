// A real front for the transport tests: NodeHttpServer on 127.0.0.1 with FrontMiddleware,
// RpcRoutes and the test hooks, real ES256 tokens verified with jose, and a DataPlane whose
// describe is the real engine over the compiled tracker catalog. Query and mutate are a
// small scripted engine that exercises each transport path (public errors, overload,
// defects, slowness) until the real planner and writer land.
import { randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { compile } from "@cairn/catalog/Catalog"
import { DescribeLimits, describe } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { Inaccessible, InvalidQuery } from "@cairn/domain/PublicError"
import { InternalError } from "@cairn/domain/InternalError"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { Overloaded } from "@cairn/domain/Overloaded"
import { type QueryRequest } from "@cairn/domain/Query"
import { BearerGate } from "@cairn/server/http/BearerGate"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { DatabaseRouter } from "@cairn/server/engine/DatabaseRouter"
import { DatabasesLive } from "@cairn/server/engine/DatabasesLive"
import { Deployment } from "@cairn/server/engine/Deployment"
import { EngineLimitsLive } from "@cairn/server/engine/EngineLimits"
import { FrontMiddleware } from "@cairn/server/http/FrontMiddleware"
import { identityLayer } from "@cairn/server/auth/IdentityLive"
import { Limits, type LimitsShape } from "@cairn/server/http/Limits"
import { RpcRoutes } from "@cairn/server/http/RpcRoutes"
import { serve } from "@cairn/server/http/Server"
import { Settings, type SettingsShape } from "@cairn/server/operations/Settings"
import { TestHookRoutes, TestHooks } from "@cairn/server/operations/TestHooks"
import { tracker } from "@cairn/testkit/fixture/tracker"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { Effect, Layer, Logger, Redacted, Stream } from "effect"
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose"
import { freePort } from "@cairn/testkit/freePort"

type KeyLike = CryptoKey

export interface Signer {
  readonly issuer: string
  readonly privateKey: KeyLike
  readonly publicJwk: Record<string, unknown>
}

export const makeSigner = (issuer: string) =>
  Effect.promise(async (): Promise<Signer> => {
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
    return { issuer, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid: "front-test", alg: "ES256" } }
  })

export interface Who {
  readonly sub: string
  readonly org?: string
  readonly roles?: ReadonlyArray<string>
}

/** A signed access token; `overrides` lets a test break exactly one property. */
export const mint = (
  signer: Signer,
  audience: string,
  who: Who,
  overrides: { readonly exp?: number; readonly key?: KeyLike; readonly issuer?: string; readonly extra?: JWTPayload } = {}
) =>
  Effect.promise(() =>
    new SignJWT({ ...(who.org !== undefined ? { org: who.org } : {}), roles: who.roles ?? [], scope: "cairn:read cairn:write", ...overrides.extra })
      .setProtectedHeader({ alg: "ES256", kid: "front-test" })
      .setSubject(who.sub)
      .setIssuer(overrides.issuer ?? signer.issuer)
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime(overrides.exp ?? Math.floor(Date.now() / 1000) + 300)
      .sign(overrides.key ?? signer.privateKey)
  )

/** The deployment's identity (jose): this test issuer only, ES256, audiences `{base}/db` and `{base}/mcp`, `org` as the database key. */
export const testIdentity = (signer: Signer, base: string) =>
  identityLayer({
    issuers: [{ issuer: signer.issuer, keys: { _tag: "Jwks", keys: [signer.publicJwk as JWK] }, algorithms: ["ES256"] }],
    audiences: { db: `${base}/db`, mcp: `${base}/mcp` },
    clockToleranceSeconds: 5,
    databases: [{ name: "tenants", keyClaim: "org", legacyKeys: true }],
    rolesClaim: "roles"
  }).pipe(Layer.orDie)

/** Text that must never reach a caller: it stands for SQL, internal ids and stack traces in a defect. */
export const secretDefect = "SELECT * FROM internal_table_7f3a WHERE db_file='tenant-9c1e.sqlite'"

/**
 * describe: the real engine. query: one row echoing the principal and the request, or a public
 * error, or a slow answer (`page.first` = 999 sleeps 5 s). mutate: a receipt echoing the input, `Inaccessible`
 * for target id "hidden", `Overloaded` for invocation ids starting "overload", a defect for "boom",
 * the engine's own `InternalError` defect for "internal".
 */
export const scriptedPlane = (journal: Array<string> = []) => Effect.gen(function* () {
  const catalog = yield* compile(tracker)
  const view = View.full(catalog)
  const sealer = yield* Sealer
  // Payloads arrive raw, as the transports pass them; the script reads them without the engine's decoding.
  return DataPlane.make({
    describe: (_principal, payload) => describe(view, payload as never).pipe(Effect.provideService(Sealer, sealer), Effect.provide(DescribeLimits.layer())),
    snapshot: () => Effect.dieMessage("the scripted plane does not sync"),
    changes: () => Stream.dieMessage("the scripted plane does not sync"),
    upload: () => Effect.dieMessage("the scripted plane stores no files"),
    download: () => Effect.dieMessage("the scripted plane stores no files"),
    link: () => Effect.dieMessage("the scripted plane stores no files"),
    resumable: () => Effect.dieMessage("the scripted plane stores no files"),
    linkPrincipal: () => Effect.dieMessage("the scripted plane stores no files"),
    here: {
      query: () => Effect.dieMessage("the scripted plane hosts no databases"),
      mutate: () => Effect.dieMessage("the scripted plane hosts no databases"),
      snapshot: () => Effect.dieMessage("the scripted plane hosts no databases")
    },
    query: (principal, payload) => {
      const request = payload as QueryRequest
      if (request.query.from.name === "Nope") return Effect.fail(new InvalidQuery({ message: 'No entity named "Nope" is defined.' }))
      if (request.query.page?.first === 999) {
        return Effect.sleep("5 seconds").pipe(
          Effect.zipRight(Effect.sync(() => journal.push("slow query completed"))),
          Effect.onInterrupt(() => Effect.sync(() => journal.push("slow query interrupted"))),
          Effect.as({ rows: [], basis: { catalogToken: view.token, position: "c000000" } })
        )
      }
      return Effect.succeed({
        rows: [{ subject: principal.subject, org: principal.databaseKey, roles: principal.roles.join(","), request }],
        basis: { catalogToken: view.token, position: "c000000" }
      })
    },
    mutate: (_principal, payload) => {
      const request = payload as MutateRequest
      if (request.target?.id === "overload") return Effect.fail(new Overloaded({ message: "The database is busy.", retryAfterSeconds: 3 }))
      if (request.target?.id === "boom") return Effect.die(new Error(secretDefect))
      if (request.target?.id === "internal") return Effect.die(InternalError.withReference("ref-1234"))
      if (request.target?.id === "hidden") return Effect.fail(new Inaccessible({ message: "That target cannot be revealed." }))
      return Effect.succeed({
        invocationId: request.invocationId,
        operation: request.operation,
        ...(request.target ? { target: request.target } : {}),
        outcome: "committed" as const,
        output: { echoedInput: request.input },
        position: "c000001",
        committedAt: "2026-01-01T00:00:00.000Z",
        catalogToken: view.token
      })
    }
  })
}).pipe(Layer.effect(DataPlane), Layer.provide(Sealer.layer(Redacted.make(randomBytes(32).toString("base64url")))))

/** The real engine over the tracker deployment, in the front's data directory. */
export const engine: Layer.Layer<DataPlane, unknown, Settings> = DataPlane.Default.pipe(
  Layer.provide(EngineLimitsLive),
  Layer.provide([DatabaseRouter.local, DatabasesLive]),
  Layer.provide([Deployment.layer(trackerDeployment), Sealer.layer(Redacted.make(randomBytes(32).toString("base64url")))])
)

export interface FrontOptions {
  readonly limits?: Partial<LimitsShape>
  /** `CAIRN_STAGE`; `null` leaves it unset (the stage then reads as development, but was never chosen). */
  readonly stage?: string | null
  readonly testHooks?: string
  /** Defaults to the scripted plane; `engine` is the real one over the tracker deployment. */
  readonly plane?: Layer.Layer<DataPlane, unknown, Settings>
}

export interface Front {
  readonly base: string
  readonly rpcUrl: string
  readonly signer: Signer
  /** A valid `db` token for `who`. */
  readonly token: (who: Who) => Effect.Effect<string>
  /** Every log line the server wrote so far (logfmt). */
  readonly logs: () => ReadonlyArray<string>
  /** What the scripted plane noticed (e.g. a slow query interrupted). */
  readonly journal: () => ReadonlyArray<string>
}

const knownStages = ["development", "test", "staging", "production"]

/** Starts the front in the current scope; it stops when the scope closes. */
export const startFront = (options: FrontOptions = {}) =>
  Effect.gen(function* () {
    const port = yield* freePort()
    const base = `http://127.0.0.1:${port}`
    const signer = yield* makeSigner(`http://127.0.0.1:${port}/issuer`)
    const stageSetting = options.stage === null ? "development" : (options.stage ?? "test")
    const settings: SettingsShape = {
      port,
      host: "127.0.0.1",
      baseUrl: base,
      dataDir: mkdtempSync(join(tmpdir(), "cairn-front-")),
      stageSetting,
      stage: knownStages.includes(stageSetting) ? (stageSetting as SettingsShape["stage"]) : undefined,
      stageExplicit: options.stage !== null,
      testHooksSetting: options.testHooks
    }
    const lines: Array<string> = []
    const journal: Array<string> = []
    const capture = Logger.replace(
      Logger.defaultLogger,
      Logger.map(Logger.logfmtLogger, (line) => void lines.push(line))
    )
    yield* serve(Layer.mergeAll(FrontMiddleware, RpcRoutes, TestHookRoutes)).pipe(
      Layer.provide([options.plane ?? scriptedPlane(journal), BearerGate.Default, Limits.layer(options.limits), TestHooks.Default]),
      Layer.provide(testIdentity(signer, base)),
      Layer.provide(Settings.layer(settings)),
      Layer.provide(capture),
      Layer.build
    )
    const front: Front = {
      base,
      rpcUrl: `${base}/db/rpc`,
      signer,
      token: (who) => mint(signer, `${base}/db`, who),
      logs: () => [...lines],
      journal: () => [...journal]
    }
    return front
  })

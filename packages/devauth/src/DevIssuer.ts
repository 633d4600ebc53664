/**
 * The development issuer: an ES256 signing key created once in the data directory
 * (`<dataDir>/dev-issuer/key.json`, mode 0600) and the issuer identifier tokens signed
 * with it carry. The server trusts it when no external issuer is configured; the token
 * script and the development authorization server sign with the same key. Never in production.
 */
import { randomBytes, randomUUID } from "node:crypto"
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from "jose"
import { Clock, Config, Context, Data, Effect, Layer } from "effect"
import { Settings } from "@cairn/server/operations/Settings"
import { devKeyPath } from "./DevToken.js"

/** The development issuer cannot start (production stage) or its key file is unusable. */
export class DevIssuerError extends Data.TaggedError("DevIssuerError")<{ readonly message: string }> {}

export interface DevKey {
  /** Private signing JWK (ES256, with `kid`, `alg` and `use`). */
  readonly privateJwk: JWK
  /** The same key without its private part: what verifiers trust. */
  readonly publicJwk: JWK
  readonly kid: string
}

export interface DevIssuerShape {
  /** The issuer identifier (`iss`) of development tokens. */
  readonly issuer: string
  readonly key: DevKey
}

export class DevIssuer extends Context.Tag("@cairn/devauth/DevIssuer")<DevIssuer, DevIssuerShape>() {}

/** Where the development key lives inside a data directory (defined with the issuer record `cairn token` reads). */
export { devKeyPath } from "./DevToken.js"

const publicPart = (jwk: JWK): JWK => {
  const { d: _, ...rest } = jwk
  return rest
}

const parseKey = (text: string): DevKey | undefined => {
  try {
    const jwk = JSON.parse(text) as JWK
    if (jwk.kty !== "EC" || jwk.crv !== "P-256" || typeof jwk.d !== "string" || typeof jwk.x !== "string" || typeof jwk.y !== "string" || typeof jwk.kid !== "string") {
      return undefined
    }
    return { privateJwk: jwk, publicJwk: publicPart(jwk), kid: jwk.kid }
  } catch {
    return undefined
  }
}

const generate = Effect.promise(async () => {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true })
  const jwk = await exportJWK(privateKey)
  const kid = await calculateJwkThumbprint(jwk)
  return { ...jwk, kid, alg: "ES256", use: "sig" } satisfies JWK
})

/**
 * Loads the development key from `dataDir`, creating it first if it does not exist.
 * Concurrent callers (server, token script, authorization server) all end up with the
 * one key that won: it is written to a temporary file and linked into place, which
 * fails if another process linked first.
 */
export const loadOrCreateDevKey = (dataDir: string): Effect.Effect<DevKey, DevIssuerError> =>
  Effect.gen(function* () {
    const file = devKeyPath(dataDir)
    const fail = (why: string) =>
      new DevIssuerError({ message: `The development signing key at ${file} ${why}; delete it to have a new one created.` })
    if (!existsSync(file)) {
      const jwk = yield* generate
      yield* Effect.try({
        try: () => {
          mkdirSync(join(dataDir, "dev-issuer"), { recursive: true, mode: 0o700 })
          const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`
          writeFileSync(temporary, JSON.stringify(jwk, null, 2) + "\n", { mode: 0o600, flag: "wx" })
          try {
            linkSync(temporary, file)
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
          } finally {
            unlinkSync(temporary)
          }
        },
        catch: (error) =>
          new DevIssuerError({
            message: `Cannot create the development signing key in ${join(dataDir, "dev-issuer")}: ${error instanceof Error ? error.message : String(error)}`
          })
      })
    }
    const text = yield* Effect.try({ try: () => readFileSync(file, "utf8"), catch: () => fail("cannot be read") })
    const key = parseKey(text)
    if (!key) return yield* fail("is not an ES256 private JWK with a kid")
    yield* Effect.sync(() => chmodSync(file, 0o600))
    return key
  }).pipe(Effect.withSpan("DevIssuer.loadOrCreateDevKey"))

/** `CAIRN_DEV_ISSUER_URL`, by default `http://127.0.0.1:<CAIRN_PORT + 1>`, without a trailing slash. */
export const devIssuerUrl = Effect.gen(function* () {
  const settings = yield* Settings
  const url = yield* Config.string("CAIRN_DEV_ISSUER_URL").pipe(Config.withDefault(`http://127.0.0.1:${settings.port + 1}`))
  return url.replace(/\/+$/, "")
})

/**
 * The development issuer of this deployment. Refuses in `production` and in an
 * unrecognized stage, where an external issuer must be configured.
 */
export const devIssuer = Effect.gen(function* () {
  const settings = yield* Settings
  if (settings.stage === "production" || settings.stage === undefined) {
    return yield* new DevIssuerError({
      message: `The development issuer does not run in stage "${settings.stageSetting}"; configure an external issuer (CAIRN_ISSUER with CAIRN_JWKS_URL or CAIRN_JWKS).`
    })
  }
  const issuer = yield* devIssuerUrl
  const key = yield* loadOrCreateDevKey(settings.dataDir)
  return { issuer, key } satisfies DevIssuerShape
})

/** Provides `DevIssuer`: for the development authorization server, which signs with the same key. */
export const DevIssuerLive = Layer.effect(DevIssuer, devIssuer)

export interface DevTokenOptions {
  readonly subject: string
  /** The audience: the resource URL, `{base}/db` or `{base}/mcp`. */
  readonly audience: string
  /** Extra claims, e.g. the database key claim (`org`) and `roles`. */
  readonly claims?: Readonly<Record<string, unknown>>
  /** Space-separated scopes. */
  readonly scope: string
  readonly ttlSeconds: number
}

/** Signs a development access token (RFC 9068 shape) with the development key. */
export const signDevToken = (issuer: DevIssuerShape, options: DevTokenOptions): Effect.Effect<string> =>
  Effect.gen(function* () {
    const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const key = yield* Effect.promise(() => importJWK(issuer.key.privateJwk, "ES256"))
    return yield* Effect.promise(() =>
      new SignJWT({ ...options.claims, scope: options.scope, client_id: "cairn-token-script" })
        .setProtectedHeader({ alg: "ES256", kid: issuer.key.kid, typ: "at+jwt" })
        .setIssuer(issuer.issuer)
        .setSubject(options.subject)
        .setAudience(options.audience)
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + options.ttlSeconds)
        .setJti(randomUUID())
        .sign(key)
    )
  }).pipe(Effect.withSpan("DevIssuer.signDevToken"))

/**
 * `Identity` verified with jose: bearer JWTs from trusted issuers (a JWKS URL, static
 * keys, or an explicitly configured HMAC secret), an algorithm allow-list, accepted token
 * types (`typ`), the resource's audience (exactly one of ours), `exp`/`nbf`/`iat` with a
 * small clock tolerance, and a claim mapping to the `Principal`. The database comes only
 * from verified claims: the database deployment (named by the selector claim when there are
 * several, see `Deployment`), then its key claim.
 */
import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, errors, type JWK, type JWTPayload, jwtVerify } from "jose"
import { Clock, Config, Data, Effect, Layer, Option, Redacted } from "effect"
import { Principal } from "@cairn/domain/Principal"
import { hotSpan } from "@cairn/domain/HotSpan"
import { type DatabaseDeployment, databaseKeyOf, defaultSelectorClaim, Deployment } from "../engine/Deployment.js"
import { externalIssuer, FallbackIssuer } from "./FallbackIssuer.js"
import { Identity, type IdentityShape, type Resource, Unauthorized } from "./Identity.js"
import { isLoopbackHost } from "./Loopback.js"
import { Settings } from "../operations/Settings.js"

/** Where an issuer's verification keys come from. */
export type KeySource =
  | { readonly _tag: "JwksUrl"; readonly url: string }
  | { readonly _tag: "Jwks"; readonly keys: ReadonlyArray<JWK> }
  /** A shared HMAC secret: only with HS* algorithms named explicitly. */
  | { readonly _tag: "Secret"; readonly secret: Redacted.Redacted<string> }

export interface TrustedIssuer {
  /** The exact `iss` value of its tokens. */
  readonly issuer: string
  readonly keys: KeySource
  /** Accepted `alg` values; default ES256, RS256 and EdDSA (a secret needs HS* named explicitly). */
  readonly algorithms?: ReadonlyArray<string>
  /**
   * Accepted `typ` header values; default `at+jwt` (RFC 9068) and `JWT`. Compared without
   * case and without an `application/` prefix (RFC 7515 §4.1.9); a token without `typ` counts
   * as `JWT` (RFC 7519 §5.1), so listing only `at+jwt` refuses untyped tokens too.
   */
  readonly tokenTypes?: ReadonlyArray<string>
}

export interface IdentityConfig {
  readonly issuers: ReadonlyArray<TrustedIssuer>
  /** The `aud` a token must carry for each resource: `{base}/db` and `{base}/mcp`. */
  readonly audiences: Readonly<Record<Resource, string>>
  readonly clockToleranceSeconds: number
  /** The deployment's database deployments: each names the claim holding its database key (e.g. `org`). */
  readonly databases: ReadonlyArray<Pick<DatabaseDeployment, "name" | "keyClaim" | "legacyKeys">>
  /** The claim naming the database deployment when there are several; default `cairn_db`. */
  readonly selectorClaim?: string
  /** The claim holding roles: an array of strings or a space-separated string. */
  readonly rolesClaim: string
}

/** The identity configuration is unusable; the server does not start. */
export class IdentityConfigError extends Data.TaggedError("IdentityConfigError")<{ readonly message: string }> {}

export const defaultAlgorithms: ReadonlyArray<string> = ["ES256", "RS256", "EdDSA"]

/**
 * Access tokens typed as such (RFC 9068), and plain JWTs because many issuers (and the
 * tokens this repository's tests and scripts mint) send `JWT` or no `typ` at all. An ID
 * token typed `id_token+jwt`, a DPoP proof (`dpop+jwt`), a logout token and the like are
 * refused: a JWT made for another purpose must not pass as an access token.
 */
export const defaultTokenTypes: ReadonlyArray<string> = ["at+jwt", "JWT"]

/** A media type as `typ` compares: lower case, without `application/`. */
const normalizeTokenType = (typ: string) => {
  const lower = typ.toLowerCase()
  return lower.startsWith("application/") ? lower.slice("application/".length) : lower
}
const asymmetric = new Set(["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA", "Ed25519"])
const hmac = new Set(["HS256", "HS384", "HS512"])


const validateIssuer = (trusted: TrustedIssuer): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const where = `issuer "${trusted.issuer}"`
  if (trusted.issuer.trim() === "") problems.push("an issuer identifier is empty")
  const secret = trusted.keys._tag === "Secret"
  const algorithms = trusted.algorithms ?? (secret ? [] : defaultAlgorithms)
  if (algorithms.length === 0) problems.push(`${where}: name its algorithms explicitly (e.g. HS256 for a shared secret)`)
  for (const alg of algorithms) {
    if (alg.toLowerCase() === "none") problems.push(`${where}: algorithm "none" is never accepted`)
    else if (hmac.has(alg)) {
      if (!secret) problems.push(`${where}: ${alg} (HMAC) needs a shared secret, never a public key`)
    } else if (asymmetric.has(alg)) {
      if (secret) problems.push(`${where}: ${alg} needs public keys (a JWKS), not a shared secret`)
    } else problems.push(`${where}: unknown algorithm "${alg}"`)
  }
  if (trusted.tokenTypes !== undefined) {
    if (trusted.tokenTypes.length === 0) problems.push(`${where}: name at least one accepted token type (e.g. at+jwt)`)
    for (const typ of trusted.tokenTypes) {
      if (!/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+\-/]*$/.test(typ)) problems.push(`${where}: the token type "${typ}" is not a media type`)
    }
  }
  switch (trusted.keys._tag) {
    case "Secret":
      if (Redacted.value(trusted.keys.secret).length < 32) problems.push(`${where}: the shared secret must be at least 32 characters`)
      break
    case "Jwks":
      if (trusted.keys.keys.length === 0) problems.push(`${where}: the JWKS has no keys`)
      for (const key of trusted.keys.keys) {
        if (key.kty === "oct" || "d" in key) problems.push(`${where}: the JWKS must hold public keys only`)
      }
      break
    case "JwksUrl": {
      let url: URL | undefined
      try {
        url = new URL(trusted.keys.url)
      } catch {
        problems.push(`${where}: the JWKS URL "${trusted.keys.url}" is not a URL`)
      }
      if (url && url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
        problems.push(`${where}: the JWKS URL must use https (plain http only on loopback)`)
      }
    }
  }
  return problems
}

const invalid = (description: string) => new Unauthorized({ error: "invalid_token", description })

/** Safe descriptions: they say what is wrong with the token, never a key or claim value. */
const describeFailure = (error: unknown): string => {
  if (error instanceof errors.JWTExpired) return "The access token has expired."
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case "nbf":
        return "The access token is not valid yet."
      case "aud":
        return "The access token was issued for a different resource."
      case "iss":
        return "The access token's issuer is not trusted here."
      case "iat":
        return "The access token's issue time is invalid."
      default:
        return error.reason === "missing" ? `The access token lacks the "${error.claim}" claim.` : `The access token's "${error.claim}" claim is invalid.`
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return "The access token is signed with an algorithm this service does not accept."
  }
  if (
    error instanceof errors.JWSSignatureVerificationFailed ||
    error instanceof errors.JWKSNoMatchingKey ||
    error instanceof errors.JWKSMultipleMatchingKeys
  ) {
    return "The access token's signature does not verify."
  }
  return "The access token is not a valid signed JWT."
}

/** Failures of the issuer's key endpoint, not of the token: logged for the operator. */
const isKeySourceFailure = (error: unknown) =>
  error instanceof errors.JWKSTimeout ||
  error instanceof errors.JWKSInvalid ||
  (error instanceof errors.JOSEError && error.code === "ERR_JOSE_GENERIC") ||
  !(error instanceof errors.JOSEError)

const stringList = (value: unknown): ReadonlyArray<string> | undefined =>
  value === undefined
    ? []
    : typeof value === "string"
      ? value.split(/\s+/).filter((s) => s !== "")
      : Array.isArray(value) && value.every((v) => typeof v === "string")
        ? value
        : undefined

const MAX_TOKEN_LENGTH = 16_384
/** Verified tokens kept at most (see `verify`). */
const VERIFIED_CAPACITY = 4096
/** A cached verification ends this long before the token's `exp`. */
const VERIFIED_MARGIN_MS = 5_000
/** ...and at most this long after it was made (keys rotate; a revoked issuer key stops working). */
const VERIFIED_MAX_MS = 5 * 60_000
const MAX_KEY_LENGTH = 256

/** Builds the verifier; fails when the configuration is unsafe or incomplete. */
export const makeIdentity = (config: IdentityConfig): Effect.Effect<IdentityShape, IdentityConfigError> =>
  Effect.gen(function* () {
    const problems = config.issuers.flatMap(validateIssuer)
    if (config.issuers.length === 0) problems.push("no trusted issuer is configured")
    if (new Set(config.issuers.map((i) => i.issuer)).size !== config.issuers.length) problems.push("an issuer is configured twice")
    if (config.databases.length === 0) problems.push("no database deployment is configured")
    if (!(config.clockToleranceSeconds >= 0 && config.clockToleranceSeconds <= 300)) problems.push("the clock tolerance must be 0 to 300 seconds")
    if (problems.length > 0) return yield* new IdentityConfigError({ message: `Identity configuration: ${problems.join("; ")}.` })

    const verifiers = new Map(
      config.issuers.map((trusted) => {
        const key =
          trusted.keys._tag === "JwksUrl"
            ? createRemoteJWKSet(new URL(trusted.keys.url), { timeoutDuration: 5_000, cooldownDuration: 30_000 })
            : trusted.keys._tag === "Jwks"
              ? createLocalJWKSet({ keys: [...trusted.keys.keys] })
              : new TextEncoder().encode(Redacted.value(trusted.keys.secret))
        const algorithms = [...(trusted.algorithms ?? defaultAlgorithms)]
        const tokenTypes = new Set((trusted.tokenTypes ?? defaultTokenTypes).map(normalizeTokenType))
        return [trusted.issuer, { key, algorithms, tokenTypes }] as const
      })
    )

    const ourAudiences = [...new Set(Object.values(config.audiences))]

    /**
     * Tokens verified recently, by resource and token text, with the time (ms) until which the
     * verification stands: shortly before `exp` (a token never outlives its expiry here).
     * Bounded; the oldest entry leaves first. Only successes are cached.
     */
    const verified = new Map<string, { readonly principal: Principal; readonly until: number }>()

    const remember = (key: string, principal: Principal, exp: number | undefined, now: number) => {
      if (typeof exp !== "number") return
      const until = Math.min(exp * 1000 - VERIFIED_MARGIN_MS, now + VERIFIED_MAX_MS)
      if (until <= now) return
      if (verified.size >= VERIFIED_CAPACITY) verified.delete(verified.keys().next().value!)
      verified.set(key, { principal, until })
    }

    // A span only for a configured tracer: every request passes here.
    const verify = (token: string, resource: Resource) =>
      hotSpan("Identity.verify")(
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const key = `${resource} ${token}`
          const hit = verified.get(key)
          if (hit !== undefined) {
            if (hit.until > now) return Effect.succeed(hit.principal)
            verified.delete(key)
          }
          return Effect.tap(verifyFully(token, resource, now), (principal) =>
            remember(key, principal, (principal.claims as { readonly exp?: number }).exp, now)
          )
        })
      )

    const verifyFully = Effect.fnUntraced(function* (token: string, resource: Resource, now: number) {
      if (token === "") return yield* new Unauthorized({ error: "invalid_request", description: "The request carries no bearer token." })
      if (token.length > MAX_TOKEN_LENGTH) return yield* invalid("The access token is too long.")
      const unverified = yield* Effect.try({ try: () => decodeJwt(token), catch: () => invalid("The access token is not a valid signed JWT.") })
      const verifier = typeof unverified.iss === "string" ? verifiers.get(unverified.iss) : undefined
      if (!verifier) return yield* invalid("The access token's issuer is not trusted here.")
      const { payload, protectedHeader } = yield* Effect.tryPromise({
        try: () =>
          jwtVerify(token, verifier.key as Parameters<typeof jwtVerify>[1], {
            issuer: unverified.iss!,
            audience: config.audiences[resource],
            algorithms: verifier.algorithms,
            clockTolerance: config.clockToleranceSeconds,
            requiredClaims: ["exp", "sub"],
            currentDate: new Date(now)
          }),
        catch: (error) => error
      }).pipe(
        Effect.catchAll((error) =>
          isKeySourceFailure(error)
            ? Effect.logWarning("Access token keys could not be fetched from the issuer", error instanceof Error ? error.message : String(error)).pipe(
                Effect.zipRight(invalid("The access token cannot be verified right now; try again shortly."))
              )
            : Effect.fail(invalid(describeFailure(error)))
        )
      )
      // Checked on the verified header and claims: what jose leaves to the application.
      const typ = protectedHeader.typ === undefined ? "jwt" : typeof protectedHeader.typ === "string" ? normalizeTokenType(protectedHeader.typ) : undefined
      if (typ === undefined || !verifier.tokenTypes.has(typ)) {
        return yield* invalid(`The access token's type (its "typ" header) is not one this service accepts; use an access token.`)
      }
      const audiences = typeof payload.aud === "string" ? [payload.aud] : payload.aud ?? []
      if (ourAudiences.filter((aud) => audiences.includes(aud)).length > 1) {
        return yield* invalid("The access token names more than one of this service's resources; request a token for exactly one.")
      }
      // jose checks a future `iat` only together with a maximum token age, which we do not set.
      if (typeof payload.iat === "number" && payload.iat > now / 1000 + config.clockToleranceSeconds) {
        return yield* invalid("The access token's issue time is in the future; check the issuer's clock.")
      }
      return yield* toPrincipal(config, payload)
    })
    return { verify }
  })

const toPrincipal = (config: IdentityConfig, payload: JWTPayload): Effect.Effect<Principal, Unauthorized> => {
  const subject = payload.sub
  if (typeof subject !== "string" || subject === "" || subject.length > MAX_KEY_LENGTH) {
    return Effect.fail(invalid(`The access token's "sub" claim must be a non-empty string.`))
  }
  const database = selectDatabase(config, payload)
  if (typeof database === "string") return Effect.fail(invalid(database))
  const key = payload[database.keyClaim]
  if (typeof key !== "string" || key === "" || key.length > MAX_KEY_LENGTH || CONTROL.test(key)) {
    return Effect.fail(invalid(`The access token lacks the "${database.keyClaim}" claim that selects the database.`))
  }
  const roles = stringList(payload[config.rolesClaim])
  if (!roles) return Effect.fail(invalid(`The access token's "${config.rolesClaim}" claim must be a string or a list of strings.`))
  const scopes = stringList(payload.scope !== undefined ? payload.scope : payload["scp"])
  if (!scopes) return Effect.fail(invalid(`The access token's scopes ("scope" or "scp") must be a string or a list of strings.`))
  return Effect.succeed(new Principal({ subject, roles, scopes, claims: payload, databaseKey: databaseKeyOf(database, key) }))
}

const CONTROL = /[\u0000-\u001f\u007f]/

/**
 * The database deployment a verified token is for, or why it is refused. One database
 * deployment: the token is for it (a selector claim, if present, must name it). Several:
 * the selector claim must be one string naming one of them.
 */
const selectDatabase = (config: IdentityConfig, payload: JWTPayload): IdentityConfig["databases"][number] | string => {
  const claim = config.selectorClaim ?? defaultSelectorClaim
  const selector = payload[claim]
  if (selector === undefined && config.databases.length === 1) return config.databases[0]!
  if (selector === undefined) return `The access token does not say which database it is for (its "${claim}" claim).`
  if (Array.isArray(selector)) return `The access token's "${claim}" claim names more than one database; request a token for exactly one.`
  const found = typeof selector === "string" ? config.databases.find((db) => db.name === selector) : undefined
  return found ?? `The access token's "${claim}" claim names no database of this service.`
}

/** `Identity` from an explicit configuration (tests, embedding). */
export const identityLayer = (config: IdentityConfig) => Layer.effect(Identity, makeIdentity(config))

const parseJwks = (text: string): ReadonlyArray<JWK> | undefined => {
  try {
    const parsed = JSON.parse(text) as { keys?: unknown }
    return Array.isArray(parsed.keys) && parsed.keys.every((k) => typeof k === "object" && k !== null) ? (parsed.keys as Array<JWK>) : undefined
  } catch {
    return undefined
  }
}

/**
 * The operator's identity configuration, read through `Config`:
 * `CAIRN_ISSUER` with exactly one of `CAIRN_JWKS_URL`, `CAIRN_JWKS` (a JWKS document) or
 * `CAIRN_TOKEN_SECRET` (HMAC, needs `CAIRN_TOKEN_ALGORITHMS=HS256`);
 * `CAIRN_TOKEN_ALGORITHMS` and `CAIRN_TOKEN_TYPES` (accepted `typ` values, default
 * `at+jwt JWT`; comma or space separated), `CAIRN_CLOCK_TOLERANCE` (seconds,
 * default 30), `CAIRN_ROLES_CLAIM` (default `roles`). Without `CAIRN_ISSUER` the
 * `FallbackIssuer` decides (the development issuer in development builds, none otherwise).
 */
export const identityConfig = Effect.gen(function* () {
  const settings = yield* Settings
  const deployment = yield* Deployment
  const issuer = yield* externalIssuer
  const algorithms = yield* Config.option(Config.string("CAIRN_TOKEN_ALGORITHMS"))
  const tokenTypes = yield* Config.option(Config.string("CAIRN_TOKEN_TYPES")).pipe(
    Config.map(Option.map((t) => t.split(/[\s,]+/).filter((s) => s !== "")))
  )
  const typed = Option.isSome(tokenTypes) ? { tokenTypes: tokenTypes.value } : {}
  const clockToleranceSeconds = yield* Config.integer("CAIRN_CLOCK_TOLERANCE").pipe(Config.withDefault(30))
  const rolesClaim = yield* Config.string("CAIRN_ROLES_CLAIM").pipe(Config.withDefault("roles"))
  const base = {
    audiences: { db: `${settings.baseUrl}/db`, mcp: `${settings.baseUrl}/mcp` },
    clockToleranceSeconds,
    databases: deployment.databases,
    selectorClaim: deployment.selectorClaim,
    rolesClaim
  }
  if (Option.isNone(issuer)) {
    const fallback = yield* FallbackIssuer
    return { ...base, issuers: [{ ...(yield* fallback.trusted), ...typed }] } satisfies IdentityConfig
  }
  const jwksUrl = yield* Config.option(Config.string("CAIRN_JWKS_URL"))
  const jwks = yield* Config.option(Config.string("CAIRN_JWKS"))
  const secret = yield* Config.option(Config.redacted("CAIRN_TOKEN_SECRET"))
  const given = [Option.isSome(jwksUrl), Option.isSome(jwks), Option.isSome(secret)].filter(Boolean).length
  if (given !== 1) {
    return yield* new IdentityConfigError({
      message: `CAIRN_ISSUER is set, so name its keys with exactly one of CAIRN_JWKS_URL, CAIRN_JWKS or CAIRN_TOKEN_SECRET (${given} given).`
    })
  }
  let keys: KeySource
  if (Option.isSome(jwksUrl)) keys = { _tag: "JwksUrl", url: jwksUrl.value }
  else if (Option.isSome(secret)) keys = { _tag: "Secret", secret: secret.value }
  else {
    const parsed = Option.isSome(jwks) ? parseJwks(jwks.value) : undefined
    if (!parsed) return yield* new IdentityConfigError({ message: `CAIRN_JWKS must be a JWKS document: {"keys": [ ...public JWKs... ]}.` })
    keys = { _tag: "Jwks", keys: parsed }
  }
  const algorithmList = Option.map(algorithms, (a) => a.split(/[\s,]+/).filter((s) => s !== ""))
  return {
    ...base,
    issuers: [{ issuer: issuer.value, keys, ...(Option.isSome(algorithmList) ? { algorithms: algorithmList.value } : {}), ...typed }]
  } satisfies IdentityConfig
})

/** `Identity` as the operator configured it (see `identityConfig`). */
export const IdentityLive = Layer.effect(Identity, Effect.flatMap(identityConfig, makeIdentity))

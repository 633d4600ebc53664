// Identity verified with jose against real signed tokens: the valid case and every attack
// the issue names (alg none, wrong key, HMAC with the public key as secret, wrong aud,
// wrong iss, expired, not yet valid, missing org, a token of another type, one naming
// both resources, one issued in the future), claim mapping, a JWKS URL served by a real
// local HTTP server, and the configuration guards.
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Redacted, TestClock } from "effect"
import { CompactSign, exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { databaseId } from "@cairn/store/Databases"
import { databaseKeyOf, Deployment } from "../src/engine/Deployment.js"
import { Identity, type Resource, Unauthorized } from "../src/auth/Identity.js"
import { identityConfig, type IdentityConfig, IdentityConfigError, makeIdentity } from "../src/auth/IdentityLive.js"
import { Settings, type SettingsShape } from "../src/operations/Settings.js"
import { FallbackIssuer } from "../src/auth/FallbackIssuer.js"

const base = "https://cairn.test"
const issuer = "https://issuer.test"
const NOW = 1_800_000_000 // seconds; the TestClock is set to it

const keyPair = (alg: "ES256" | "RS256" | "EdDSA", kid: string) =>
  Effect.promise(async () => {
    const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
    return { privateKey, publicKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg } as JWK, pem: await exportSPKI(publicKey) }
  })

const keys = Effect.runSync(
  Effect.cached(
    Effect.all({
      main: keyPair("ES256", "main"),
      other: keyPair("ES256", "main"), // same kid, different key
      rsa: keyPair("RS256", "rsa"),
      ed: keyPair("EdDSA", "ed")
    })
  )
)

const configWith = (publicJwks: ReadonlyArray<JWK>, overrides: Partial<IdentityConfig> = {}): IdentityConfig => ({
  issuers: [{ issuer, keys: { _tag: "Jwks", keys: publicJwks } }],
  audiences: { db: `${base}/db`, mcp: `${base}/mcp` },
  clockToleranceSeconds: 30,
  databases: [{ name: "tenants", keyClaim: "org", legacyKeys: true }],
  rolesClaim: "roles",
  ...overrides
})

interface Claims {
  readonly [claim: string]: unknown
}

const claimsFor = (resource: Resource, extra: Claims = {}): Claims => ({
  iss: issuer,
  sub: "alice",
  aud: `${base}/${resource}`,
  iat: NOW,
  exp: NOW + 600,
  org: "acme",
  ...extra
})

const sign = (claims: Claims, key: CryptoKey | Uint8Array, header: { alg: string; kid?: string; typ?: string } = { alg: "ES256", kid: "main" }) =>
  Effect.promise(() => new SignJWT({ ...claims }).setProtectedHeader(header).sign(key))

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** Runs `verify` with the clock at NOW; returns the principal or the Unauthorized failure. */
const verifyWith = (config: IdentityConfig, token: string, resource: Resource = "db") =>
  Effect.gen(function* () {
    yield* TestClock.setTime(NOW * 1000)
    const identity = yield* makeIdentity(config)
    return yield* Effect.either(identity.verify(token, resource))
  })

const refused = (config: IdentityConfig, token: string, resource: Resource = "db") =>
  Effect.gen(function* () {
    const result = yield* verifyWith(config, token, resource)
    assert.isTrue(result._tag === "Left", "the token should be refused")
    const error = (result as { left: Unauthorized }).left
    assert.instanceOf(error, Unauthorized)
    return error
  })

const accepted = (config: IdentityConfig, token: string, resource: Resource = "db") =>
  Effect.gen(function* () {
    const result = yield* verifyWith(config, token, resource)
    if (result._tag === "Left") assert.fail(`refused: ${result.left.description}`)
    return (result as { right: import("@cairn/domain/Principal").Principal }).right
  })

describe("Identity (jose)", () => {
  it.effect("accepts a valid token and maps subject, roles, scopes and the database key", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const token = yield* sign(claimsFor("db", { roles: ["admin", "editor"], scope: "cairn:read cairn:write" }), k.main.privateKey)
      const principal = yield* accepted(config, token)
      assert.strictEqual(principal.subject, "alice")
      assert.strictEqual(principal.databaseKey, "acme")
      assert.deepStrictEqual(principal.roles, ["admin", "editor"])
      assert.deepStrictEqual(principal.scopes, ["cairn:read", "cairn:write"])
      assert.strictEqual(principal.claims["org"], "acme")
      assert.isTrue(principal.hasRole("admin"))
      // The same token at the MCP endpoint is refused: its audience is the data plane.
      const atMcp = yield* refused(config, token, "mcp")
      assert.strictEqual(atMcp.description, "The access token was issued for a different resource.")
    }))

  it.effect("maps roles and scopes given in their other shapes", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const spaced = yield* accepted(config, yield* sign(claimsFor("db", { roles: "admin  viewer", scp: ["cairn:read"] }), k.main.privateKey))
      assert.deepStrictEqual(spaced.roles, ["admin", "viewer"])
      assert.deepStrictEqual(spaced.scopes, ["cairn:read"])
      const scpString = yield* accepted(config, yield* sign(claimsFor("db", { scp: "cairn:write" }), k.main.privateKey))
      assert.deepStrictEqual(scpString.scopes, ["cairn:write"])
      assert.deepStrictEqual(scpString.roles, [])
      const custom = yield* accepted(configWith([k.main.publicJwk], { rolesClaim: "groups", databases: [{ name: "tenants", keyClaim: "tenant", legacyKeys: true }] }), yield* sign(claimsFor("db", { groups: ["ops"], tenant: "t1" }), k.main.privateKey))
      assert.deepStrictEqual(custom.roles, ["ops"])
      assert.strictEqual(custom.databaseKey, "t1")
      const badRoles = yield* refused(config, yield* sign(claimsFor("db", { roles: [1, 2] }), k.main.privateKey))
      assert.strictEqual(badRoles.description, `The access token's "roles" claim must be a string or a list of strings.`)
      const badScope = yield* refused(config, yield* sign(claimsFor("db", { scope: { a: 1 } }), k.main.privateKey))
      assert.match(badScope.description, /scopes/)
    }))

  it.effect("selects the database deployment only from verified claims and namespaces its keys", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk], {
        databases: [
          { name: "personal", keyClaim: "sub" },
          { name: "teams", keyClaim: "org" }
        ]
      })
      const as = (extra: Claims) => Effect.flatMap(sign(claimsFor("db", extra), k.main.privateKey), (token) => accepted(config, token))
      const refuse = (extra: Claims) => Effect.flatMap(sign(claimsFor("db", extra), k.main.privateKey), (token) => refused(config, token))
      const personal = yield* as({ cairn_db: "personal", org: "alice" })
      const team = yield* as({ cairn_db: "teams", org: "alice" })
      assert.strictEqual(personal.databaseKey, databaseKeyOf({ name: "personal" }, "alice"))
      assert.strictEqual(team.databaseKey, databaseKeyOf({ name: "teams" }, "alice"))
      // An org named alice and the user alice are different databases.
      assert.notStrictEqual(personal.databaseKey, team.databaseKey)
      assert.notStrictEqual(databaseId(personal.databaseKey), databaseId(team.databaseKey))
      assert.match((yield* refuse({})).description, /does not say which database/)
      assert.match((yield* refuse({ cairn_db: ["personal", "teams"] })).description, /more than one database/)
      assert.match((yield* refuse({ cairn_db: "tenants" })).description, /names no database/)
      assert.match((yield* refuse({ cairn_db: 7 })).description, /names no database/)
      assert.match((yield* refuse({ cairn_db: "teams", org: undefined })).description, /lacks the "org" claim/)
      assert.match((yield* refuse({ cairn_db: "teams", org: "a\u0000b" })).description, /lacks the "org" claim/)
      // With one database deployment no selector is needed, but a present one must name it.
      const single = configWith([k.main.publicJwk])
      assert.strictEqual((yield* accepted(single, yield* sign(claimsFor("db", { cairn_db: "tenants" }), k.main.privateKey))).databaseKey, "acme")
      assert.match((yield* refused(single, yield* sign(claimsFor("db", { cairn_db: "personal" }), k.main.privateKey))).description, /names no database/)
    }))

  it.effect("refuses alg none", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const token = `${b64({ alg: "none", typ: "JWT" })}.${b64(claimsFor("db"))}.`
      const error = yield* refused(configWith([k.main.publicJwk]), token)
      assert.strictEqual(error.error, "invalid_token")
      assert.strictEqual(error.description, "The access token is signed with an algorithm this service does not accept.")
    }))

  it.effect("refuses a token signed with another key under the trusted kid", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const token = yield* sign(claimsFor("db"), k.other.privateKey)
      const error = yield* refused(configWith([k.main.publicJwk]), token)
      assert.strictEqual(error.description, "The access token's signature does not verify.")
    }))

  it.effect("refuses HMAC signed with the public key as the secret", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk, k.rsa.publicJwk])
      for (const secret of [k.rsa.pem, JSON.stringify(k.main.publicJwk), k.main.publicJwk.x!]) {
        for (const kid of ["main", "rsa", undefined]) {
          const token = yield* sign(claimsFor("db"), new TextEncoder().encode(secret), kid ? { alg: "HS256", kid } : { alg: "HS256" })
          const error = yield* refused(config, token)
          assert.strictEqual(error.description, "The access token is signed with an algorithm this service does not accept.")
        }
      }
    }))

  it.effect("refuses the wrong audience in both directions, and a foreign one", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const mcp = yield* sign(claimsFor("mcp"), k.main.privateKey)
      assert.strictEqual((yield* accepted(config, mcp, "mcp")).subject, "alice")
      assert.strictEqual((yield* refused(config, mcp, "db")).description, "The access token was issued for a different resource.")
      const foreign = yield* sign(claimsFor("db", { aud: "https://elsewhere.test/db" }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, foreign)).description, "The access token was issued for a different resource.")
      const none = yield* sign(claimsFor("db", { aud: undefined }), k.main.privateKey)
      yield* refused(config, none)
    }))

  it.effect("accepts access tokens typed at+jwt or JWT (or untyped) and refuses tokens of other types", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const typed = (typ: string | undefined) => sign(claimsFor("db"), k.main.privateKey, { alg: "ES256", kid: "main", ...(typ === undefined ? {} : { typ }) })
      const config = configWith([k.main.publicJwk])
      for (const typ of ["at+jwt", "AT+JWT", "application/at+jwt", "JWT", "jwt", "Application/JWT", undefined]) {
        yield* accepted(config, yield* typed(typ))
      }
      const description = `The access token's type (its "typ" header) is not one this service accepts; use an access token.`
      for (const typ of ["dpop+jwt", "id_token+jwt", "logout+jwt", "secevent+jwt", "application/dpop+jwt", "at+jwt+x", "", "application/"]) {
        const error = yield* refused(config, yield* typed(typ))
        assert.strictEqual(error.error, "invalid_token")
        assert.strictEqual(error.description, description, JSON.stringify(typ))
      }
      // A typ that is not a string at all.
      const odd = yield* Effect.promise(() =>
        new CompactSign(new TextEncoder().encode(JSON.stringify(claimsFor("db"))))
          .setProtectedHeader({ alg: "ES256", kid: "main", typ: 7 as unknown as string })
          .sign(k.main.privateKey)
      )
      assert.strictEqual((yield* refused(config, odd)).description, description)
      // An issuer configured for typed access tokens only refuses plain and untyped JWTs.
      const strict = configWith([], { issuers: [{ issuer, keys: { _tag: "Jwks", keys: [k.main.publicJwk] }, tokenTypes: ["application/AT+JWT"] }] })
      yield* accepted(strict, yield* typed("at+jwt"))
      for (const typ of ["JWT", undefined]) assert.strictEqual((yield* refused(strict, yield* typed(typ))).description, description)
    }))

  it.effect("refuses a token whose audience names both of this service's resources", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const both = yield* sign(claimsFor("db", { aud: [`${base}/db`, `${base}/mcp`] }), k.main.privateKey)
      for (const resource of ["db", "mcp"] as const) {
        assert.strictEqual(
          (yield* refused(config, both, resource)).description,
          "The access token names more than one of this service's resources; request a token for exactly one."
        )
      }
      // One of ours alongside a foreign audience is still a token for exactly one of ours.
      const withForeign = yield* sign(claimsFor("db", { aud: ["https://elsewhere.test/api", `${base}/db`] }), k.main.privateKey)
      yield* accepted(config, withForeign)
      const listed = yield* sign(claimsFor("mcp", { aud: [`${base}/mcp`] }), k.main.privateKey)
      yield* accepted(config, listed, "mcp")
    }))

  it.effect("refuses a token issued in the future beyond the clock tolerance only", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const future = yield* sign(claimsFor("db", { iat: NOW + 60 }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, future)).description, "The access token's issue time is in the future; check the issuer's clock.")
      yield* accepted(config, yield* sign(claimsFor("db", { iat: NOW + 30 }), k.main.privateKey))
      yield* accepted(config, yield* sign(claimsFor("db", { iat: undefined }), k.main.privateKey))
      const tight = configWith([k.main.publicJwk], { clockToleranceSeconds: 0 })
      yield* refused(tight, yield* sign(claimsFor("db", { iat: NOW + 1 }), k.main.privateKey))
      const invalidIat = yield* sign(claimsFor("db", { iat: "soon" }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, invalidIat)).description, "The access token's issue time is invalid.")
    }))

  it.effect("refuses a token from an untrusted issuer, even when signed with a trusted key", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const token = yield* sign(claimsFor("db", { iss: "https://evil.test" }), k.main.privateKey)
      assert.strictEqual((yield* refused(configWith([k.main.publicJwk]), token)).description, "The access token's issuer is not trusted here.")
      const noIss = yield* sign(claimsFor("db", { iss: undefined }), k.main.privateKey)
      assert.strictEqual((yield* refused(configWith([k.main.publicJwk]), noIss)).description, "The access token's issuer is not trusted here.")
    }))

  it.effect("refuses expired and not-yet-valid tokens beyond the clock tolerance only", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const expired = yield* sign(claimsFor("db", { iat: NOW - 3600, exp: NOW - 60 }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, expired)).description, "The access token has expired.")
      const justExpired = yield* sign(claimsFor("db", { iat: NOW - 3600, exp: NOW - 10 }), k.main.privateKey)
      yield* accepted(config, justExpired)
      const early = yield* sign(claimsFor("db", { nbf: NOW + 60 }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, early)).description, "The access token is not valid yet.")
      const almost = yield* sign(claimsFor("db", { nbf: NOW + 10 }), k.main.privateKey)
      yield* accepted(config, almost)
      const noExp = yield* sign(claimsFor("db", { exp: undefined }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, noExp)).description, `The access token lacks the "exp" claim.`)
      // Time moves on: the valid token expires once the clock passes exp + tolerance.
      const identity = yield* makeIdentity(config)
      const token = yield* sign(claimsFor("db", { exp: NOW + 100 }), k.main.privateKey)
      yield* identity.verify(token, "db")
      yield* TestClock.adjust("131 seconds")
      const later = yield* Effect.flip(identity.verify(token, "db"))
      assert.strictEqual(later.description, "The access token has expired.")
    }))

  it.effect("a verified token is remembered per resource only: the same token stays refused for the other resource", () =>
    Effect.gen(function* () {
      const k = yield* keys
      yield* TestClock.setTime(NOW * 1000)
      const identity = yield* makeIdentity(configWith([k.main.publicJwk]))
      const token = yield* sign(claimsFor("db"), k.main.privateKey)
      const first = yield* identity.verify(token, "db")
      const again = yield* identity.verify(token, "db")
      assert.strictEqual(again.subject, first.subject)
      assert.strictEqual(again.databaseKey, first.databaseKey)
      const other = yield* Effect.flip(identity.verify(token, "mcp"))
      assert.strictEqual(other.description, "The access token was issued for a different resource.")
    }))

  it.effect("refuses a token without the database key claim, or with an unusable one, or without sub", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      for (const org of [undefined, "", 42, ["acme"], "x".repeat(257)]) {
        const token = yield* sign(claimsFor("db", { org }), k.main.privateKey)
        assert.strictEqual((yield* refused(config, token)).description, `The access token lacks the "org" claim that selects the database.`)
      }
      const noSub = yield* sign(claimsFor("db", { sub: undefined }), k.main.privateKey)
      assert.strictEqual((yield* refused(config, noSub)).description, `The access token lacks the "sub" claim.`)
    }))

  it.effect("refuses what is not a JWT, and says when there is no token at all", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = configWith([k.main.publicJwk])
      const empty = yield* refused(config, "")
      assert.strictEqual(empty.error, "invalid_request")
      for (const junk of ["abc", "a.b.c", "x".repeat(20_000)]) {
        assert.strictEqual((yield* refused(config, junk)).error, "invalid_token")
      }
    }))

  it.effect("honours the algorithm allow-list", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const ed = yield* sign(claimsFor("db"), k.ed.privateKey, { alg: "EdDSA", kid: "ed" })
      yield* accepted(configWith([k.ed.publicJwk]), ed)
      const esOnly = configWith([k.ed.publicJwk, k.main.publicJwk], { issuers: [{ issuer, keys: { _tag: "Jwks", keys: [k.ed.publicJwk] }, algorithms: ["ES256"] }] })
      assert.strictEqual((yield* refused(esOnly, ed)).description, "The access token is signed with an algorithm this service does not accept.")
    }))

  it.effect("accepts HMAC only with an explicitly configured secret and algorithm", () =>
    Effect.gen(function* () {
      const secret = "s".repeat(40)
      const config = configWith([], { issuers: [{ issuer, keys: { _tag: "Secret", secret: Redacted.make(secret) }, algorithms: ["HS256"] }] })
      const good = yield* sign(claimsFor("db"), new TextEncoder().encode(secret), { alg: "HS256" })
      yield* accepted(config, good)
      const forged = yield* sign(claimsFor("db"), new TextEncoder().encode("t".repeat(40)), { alg: "HS256" })
      assert.strictEqual((yield* refused(config, forged)).description, "The access token's signature does not verify.")
    }))

  it.effect("refuses unsafe configurations before serving anything", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const problem = (config: IdentityConfig) =>
        Effect.flip(makeIdentity(config)).pipe(
          Effect.map((e) => {
            assert.instanceOf(e, IdentityConfigError)
            return e.message
          })
        )
      const jwks = { _tag: "Jwks" as const, keys: [k.main.publicJwk] }
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: jwks, algorithms: ["none"] }] })), `algorithm "none" is never accepted`)
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: jwks, algorithms: ["HS256"] }] })), "HS256 (HMAC) needs a shared secret, never a public key")
      const secret = { _tag: "Secret" as const, secret: Redacted.make("short") }
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: secret }] })), "name its algorithms explicitly")
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: secret, algorithms: ["HS256"] }] })), "at least 32 characters")
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: { ...secret, secret: Redacted.make("s".repeat(32)) }, algorithms: ["RS256"] }] })), "RS256 needs public keys")
      const privateJwk = { ...(yield* Effect.promise(() => exportJWK(k.main.privateKey))), kid: "p" }
      assert.include(yield* problem(configWith([privateJwk])), "public keys only")
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: { _tag: "JwksUrl", url: "http://keys.example.com/jwks" } }] })), "must use https")
      assert.include(yield* problem(configWith([], { issuers: [] })), "no trusted issuer")
      assert.include(yield* problem(configWith([k.main.publicJwk], { clockToleranceSeconds: 3600 })), "clock tolerance")
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: jwks, tokenTypes: [] }] })), "at least one accepted token type")
      assert.include(yield* problem(configWith([], { issuers: [{ issuer, keys: jwks, tokenTypes: ["at jwt"] }] })), "is not a media type")
    }))
})

/** A real JWKS endpoint on 127.0.0.1; `keys` can be swapped to simulate rotation. */
const jwksServer = (initial: ReadonlyArray<JWK>) =>
  Effect.acquireRelease(
    Effect.async<{ server: Server; url: string; state: { keys: ReadonlyArray<JWK>; hits: number } }>((resume) => {
      const state = { keys: initial, hits: 0 }
      const server = createServer((req, res) => {
        state.hits++
        if (req.url !== "/jwks") {
          res.writeHead(404).end()
          return
        }
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: state.keys }))
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`, state })))
    }),
    ({ server }) => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )

describe("Identity with a JWKS URL", () => {
  const live = (extra: Claims = {}) => {
    const now = Math.floor(Date.now() / 1000)
    return claimsFor("db", { iat: now, exp: now + 600, ...extra })
  }

  it.scopedLive("fetches keys from the issuer's JWKS endpoint", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const { url, state } = yield* jwksServer([k.rsa.publicJwk, k.main.publicJwk])
      const config = configWith([], { issuers: [{ issuer, keys: { _tag: "JwksUrl", url } }] })
      const identity = yield* makeIdentity(config)
      const token = yield* sign(live(), k.rsa.privateKey, { alg: "RS256", kid: "rsa" })
      const principal = yield* identity.verify(token, "db")
      assert.strictEqual(principal.databaseKey, "acme")
      assert.isAbove(state.hits, 0)
      const es = yield* sign(live(), k.main.privateKey)
      yield* identity.verify(es, "db")
      const forged = yield* sign(live(), k.other.privateKey)
      assert.strictEqual((yield* Effect.flip(identity.verify(forged, "db"))).description, "The access token's signature does not verify.")
      const unknownKid = yield* sign(live(), k.ed.privateKey, { alg: "EdDSA", kid: "ed" })
      assert.strictEqual((yield* Effect.flip(identity.verify(unknownKid, "db"))).description, "The access token's signature does not verify.")
    }))

  it.live("says the token cannot be verified right now when the JWKS endpoint is down", () =>
    Effect.gen(function* () {
      const k = yield* keys
      // The server is closed again when this scope ends: its URL is dead.
      const { url } = yield* Effect.scoped(jwksServer([k.main.publicJwk]))
      const identity = yield* makeIdentity(configWith([], { issuers: [{ issuer, keys: { _tag: "JwksUrl", url } }] }))
      const token = yield* sign(live(), k.main.privateKey)
      const error = yield* Effect.flip(identity.verify(token, "db"))
      assert.strictEqual(error.description, "The access token cannot be verified right now; try again shortly.")
    }))
})

const settings = (overrides: Partial<SettingsShape> = {}): SettingsShape => ({
  port: 8787,
  host: "127.0.0.1",
  baseUrl: base,
  dataDir: "/nonexistent",
  stageSetting: "production",
  stage: "production",
  stageExplicit: true,
  testHooksSetting: undefined,
  ...overrides
})

const deployment = Deployment.layer(trackerDeployment)

/** A deployment that trusts no issuer unless the operator names one. */
const noFallback = FallbackIssuer.none(new IdentityConfigError({ message: "CAIRN_ISSUER is not set: configure an external issuer." }))

const configFrom = (env: Record<string, string>, s: SettingsShape = settings()) =>
  identityConfig.pipe(
    Effect.provide(Layer.mergeAll(Settings.layer(s), deployment, noFallback)),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))
  )

describe("identity configuration", () => {
  it.effect("reads an external issuer with static keys and an algorithm list", () =>
    Effect.gen(function* () {
      const k = yield* keys
      const config = yield* configFrom({
        CAIRN_ISSUER: issuer,
        CAIRN_JWKS: JSON.stringify({ keys: [k.main.publicJwk] }),
        CAIRN_TOKEN_ALGORITHMS: "ES256, EdDSA",
        CAIRN_CLOCK_TOLERANCE: "10"
      })
      assert.deepStrictEqual(config.audiences, { db: `${base}/db`, mcp: `${base}/mcp` })
      assert.deepStrictEqual(config.databases.map((db) => db.keyClaim), ["org"])
      assert.strictEqual(config.clockToleranceSeconds, 10)
      assert.deepStrictEqual(config.issuers, [{ issuer, keys: { _tag: "Jwks", keys: [k.main.publicJwk] }, algorithms: ["ES256", "EdDSA"] }])
      const token = yield* sign(claimsFor("mcp"), k.main.privateKey)
      assert.strictEqual((yield* accepted(config, token, "mcp")).subject, "alice")
      assert.isUndefined(config.issuers[0]!.tokenTypes)
      const typed = yield* configFrom({ CAIRN_ISSUER: issuer, CAIRN_JWKS: JSON.stringify({ keys: [k.main.publicJwk] }), CAIRN_TOKEN_TYPES: "at+jwt, application/JWT" })
      assert.deepStrictEqual(typed.issuers[0]!.tokenTypes, ["at+jwt", "application/JWT"])
      const strict = yield* configFrom({ CAIRN_ISSUER: issuer, CAIRN_JWKS: JSON.stringify({ keys: [k.main.publicJwk] }), CAIRN_TOKEN_TYPES: "at+jwt" })
      assert.strictEqual(
        (yield* refused(strict, token, "mcp")).description,
        `The access token's type (its "typ" header) is not one this service accepts; use an access token.`
      )
    }))

  it.effect("needs exactly one key source for an external issuer", () =>
    Effect.gen(function* () {
      const none = yield* Effect.flip(configFrom({ CAIRN_ISSUER: issuer }))
      assert.include((none as IdentityConfigError).message, "exactly one of CAIRN_JWKS_URL, CAIRN_JWKS or CAIRN_TOKEN_SECRET (0 given)")
      const two = yield* Effect.flip(configFrom({ CAIRN_ISSUER: issuer, CAIRN_JWKS_URL: "https://x.test/jwks", CAIRN_JWKS: "{}" }))
      assert.include((two as IdentityConfigError).message, "(2 given)")
      const bad = yield* Effect.flip(configFrom({ CAIRN_ISSUER: issuer, CAIRN_JWKS: "not json" }))
      assert.include((bad as IdentityConfigError).message, "CAIRN_JWKS must be a JWKS document")
    }))

  it.effect("without CAIRN_ISSUER the deployment's fallback decides; with none, identity does not start", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(configFrom({}))
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(configFrom({}))
      assert.strictEqual(error._tag, "IdentityConfigError")
      assert.include((error as { message: string }).message, "CAIRN_ISSUER")
    }))
})

// The development authorization server against real HTTP: discovery, dynamic registration,
// authorization code with PKCE through the login page, client_credentials, JWT access
// tokens bound to one resource (checked with jose against the issuer's public key), and
// its refusal to run in production.
import { createHash, randomBytes } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { existsSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { createLocalJWKSet, exportJWK, generateKeyPair, type JWK, jwtVerify } from "jose"
import { Deployment } from "@cairn/server/engine/Deployment"
import { Identity } from "@cairn/server/auth/Identity"
import { IdentityLive } from "@cairn/server/auth/IdentityLive"
import { Settings, type SettingsShape } from "@cairn/server/operations/Settings"
import { DevAuthServer, DevAuthServerLive, layer, layerWith, signIn } from "../src/DevAuthServer.js"
import { DevFallbackIssuer } from "../src/DevIdentity.js"
import { devKeyPath, DevIssuerLive } from "../src/DevIssuer.js"
import { freePort } from "@cairn/testkit/freePort"

const keys = Effect.promise(async () => {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
  const meta = { kid: "dev-test", alg: "ES256", use: "sig" }
  return {
    privateJwk: { ...(await exportJWK(privateKey)), ...meta } as JWK,
    publicJwk: { ...(await exportJWK(publicKey)), ...meta } as JWK
  }
})

const settingsFor = (port: number, stageSetting: string): SettingsShape => ({
  port,
  host: "127.0.0.1",
  baseUrl: `http://127.0.0.1:${port}`,
  dataDir: "/nonexistent",
  stageSetting,
  stage: (["development", "test", "staging", "production"] as const).find((s) => s === stageSetting),
  stageExplicit: true,
  testHooksSetting: undefined
})

/** Starts the server for the test's scope; returns what the assertions need. */
const start = (stage = "test") =>
  Effect.gen(function* () {
    const port = yield* freePort()
    const asPort = yield* freePort()
    const base = `http://127.0.0.1:${port}`
    const issuer = `http://127.0.0.1:${asPort}`
    const { privateJwk, publicJwk } = yield* keys
    const layer = layerWith({ issuer, signingKey: privateJwk, resources: [`${base}/mcp`, `${base}/db`] }).pipe(
      Layer.provide(Settings.layer(settingsFor(port, stage)))
    )
    const context = yield* Layer.build(layer)
    return { base, issuer, server: context.unsafeMap.get(DevAuthServer.key) as DevAuthServer["Type"], jwks: createLocalJWKSet({ keys: [publicJwk] }) }
  })

const json = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, body: (await response.json()) as Record<string, any> }
  })

const register = (issuer: string, metadata: Record<string, unknown>) =>
  json(`${issuer}/reg`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(metadata) })

const clientCredentials = (issuer: string, client: Record<string, any>, params: Record<string, string>) =>
  json(`${issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${Buffer.from(`${client["client_id"]}:${client["client_secret"]}`).toString("base64")}`
    },
    body: new URLSearchParams({ grant_type: "client_credentials", ...params }).toString()
  })

const pkce = () => {
  const verifier = randomBytes(32).toString("base64url")
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") }
}

describe("DevAuthServer", () => {
  it.scoped("publishes discovery metadata for registration, PKCE, client_credentials and Cairn scopes", () =>
    Effect.gen(function* () {
      const { issuer, server } = yield* start()
      assert.strictEqual(server.issuer, issuer)
      const { status, body } = yield* json(`${issuer}/.well-known/openid-configuration`)
      assert.strictEqual(status, 200)
      assert.strictEqual(body["issuer"], issuer)
      assert.strictEqual(body["registration_endpoint"], `${issuer}/reg`)
      assert.deepStrictEqual(body["code_challenge_methods_supported"], ["S256"])
      assert.includeMembers(body["grant_types_supported"], ["authorization_code", "client_credentials"])
      assert.includeMembers(body["scopes_supported"], ["cairn:read", "cairn:write"])
    })
  )

  it.scoped("client_credentials: a JWT bound to the requested resource, with the client's org and roles", () =>
    Effect.gen(function* () {
      const { base, issuer, jwks } = yield* start()
      const reg = yield* register(issuer, {
        client_name: "robot",
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        org: "acme",
        roles: "admin ops"
      })
      assert.strictEqual(reg.status, 201, JSON.stringify(reg.body))
      const token = yield* clientCredentials(issuer, reg.body, { resource: `${base}/mcp`, scope: "cairn:read" })
      assert.strictEqual(token.status, 200, JSON.stringify(token.body))
      const { payload, protectedHeader } = yield* Effect.promise(() =>
        jwtVerify(token.body["access_token"], jwks, { issuer, audience: `${base}/mcp` })
      )
      assert.strictEqual(protectedHeader.alg, "ES256")
      assert.strictEqual(protectedHeader.kid, "dev-test")
      assert.strictEqual(payload.sub, reg.body["client_id"])
      assert.strictEqual(payload["org"], "acme")
      assert.deepStrictEqual(payload["roles"], ["admin", "ops"])
      assert.strictEqual(payload["scope"], "cairn:read")

      const db = yield* clientCredentials(issuer, reg.body, { resource: `${base}/db`, scope: "cairn:read cairn:write" })
      const dbPayload = yield* Effect.promise(() => jwtVerify(db.body["access_token"], jwks, { issuer, audience: `${base}/db` }))
      assert.strictEqual(dbPayload.payload["scope"], "cairn:read cairn:write")

      const foreign = yield* clientCredentials(issuer, reg.body, { resource: "https://elsewhere.example/mcp", scope: "cairn:read" })
      assert.strictEqual(foreign.status, 400)
      assert.strictEqual(foreign.body["error"], "invalid_target")
    })
  )

  it.scoped("registration refuses an org that is not a short identifier", () =>
    Effect.gen(function* () {
      const { issuer } = yield* start()
      const reg = yield* register(issuer, { grant_types: ["client_credentials"], response_types: [], redirect_uris: [], org: "a b<c>" })
      assert.strictEqual(reg.status, 400)
      assert.strictEqual(reg.body["error"], "invalid_client_metadata")
    })
  )

  it.scoped("authorization code + PKCE through the login page: sub, org and roles chosen there become claims", () =>
    Effect.gen(function* () {
      const { base, issuer, jwks } = yield* start()
      const redirectUri = "http://127.0.0.1:9/callback"
      const reg = yield* register(issuer, {
        client_name: "public client",
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "none"
      })
      assert.strictEqual(reg.status, 201, JSON.stringify(reg.body))
      const clientId = reg.body["client_id"] as string
      const authorize = (extra: Record<string, string>) =>
        `${issuer}/auth?${new URLSearchParams({
          response_type: "code",
          client_id: clientId,
          redirect_uri: redirectUri,
          scope: "cairn:read cairn:write",
          resource: `${base}/mcp`,
          state: "s1",
          ...extra
        })}`

      // Without PKCE the request never reaches the login page.
      const refused = yield* signIn(authorize({}), { sub: "alice", org: "acme" })
      assert.strictEqual(refused.searchParams.get("error"), "invalid_request")
      assert.strictEqual(refused.searchParams.get("code"), null)

      const { challenge } = pkce()
      const back = yield* signIn(authorize({ code_challenge: challenge, code_challenge_method: "S256" }), {
        sub: "alice",
        org: "acme",
        roles: ["admin"]
      })
      assert.strictEqual(`${back.origin}${back.pathname}`, redirectUri)
      assert.strictEqual(back.searchParams.get("state"), "s1")
      const code = back.searchParams.get("code")
      assert.isString(code)

      const exchange = (codeVerifier: string) =>
        json(`${issuer}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "authorization_code",
            code: code!,
            redirect_uri: redirectUri,
            client_id: clientId,
            code_verifier: codeVerifier,
            resource: `${base}/mcp`
          }).toString()
        })
      const wrongVerifier = yield* exchange(pkce().verifier)
      assert.strictEqual(wrongVerifier.status, 400)
      assert.strictEqual(wrongVerifier.body["error"], "invalid_grant")

      // The code was consumed by the failed attempt, so sign in again for a fresh one.
      const second = pkce()
      const again = yield* signIn(authorize({ code_challenge: second.challenge, code_challenge_method: "S256" }), {
        sub: "bob",
        org: "globex",
        roles: ["viewer", "auditor"]
      })
      const token = yield* json(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code: again.searchParams.get("code")!,
          redirect_uri: redirectUri,
          client_id: clientId,
          code_verifier: second.verifier,
          resource: `${base}/mcp`
        }).toString()
      })
      assert.strictEqual(token.status, 200, JSON.stringify(token.body))
      const { payload } = yield* Effect.promise(() =>
        jwtVerify(token.body["access_token"], jwks, { issuer, audience: `${base}/mcp` })
      )
      assert.strictEqual(payload.sub, "bob")
      assert.strictEqual(payload["org"], "globex")
      assert.deepStrictEqual(payload["roles"], ["viewer", "auditor"])
      assert.strictEqual(payload["scope"], "cairn:read cairn:write")
    })
  )

  it.scoped("the login page refuses a subject that is not a short identifier", () =>
    Effect.gen(function* () {
      const { base, issuer } = yield* start()
      const reg = yield* register(issuer, {
        redirect_uris: ["http://127.0.0.1:9/cb"],
        token_endpoint_auth_method: "none"
      })
      const { challenge } = pkce()
      const exit = yield* Effect.exit(
        signIn(
          `${issuer}/auth?${new URLSearchParams({
            response_type: "code",
            client_id: reg.body["client_id"],
            redirect_uri: "http://127.0.0.1:9/cb",
            scope: "cairn:read",
            resource: `${base}/mcp`,
            code_challenge: challenge,
            code_challenge_method: "S256"
          })}`,
          { sub: "alice smith <script>", org: "acme" }
        )
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "HTTP 400")
    })
  )

  for (const stage of ["production", "prod"]) {
    it.scoped(`refuses to start in stage "${stage}"`, () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(start(stage))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit) ? exit.cause.toString() : ""
        assert.include(error, `does not run in stage "${stage}"`)
        assert.include(error, "CAIRN_ISSUER")
      })
    )
  }

  // Live clock: the authorization server stamps its tokens with the real time.
  it.scopedLive("with the development issuer's key from the data dir, its tokens pass IdentityLive for exactly their resource", () =>
    Effect.gen(function* () {
      const port = yield* freePort()
      const asPort = yield* freePort()
      const issuer = `http://127.0.0.1:${asPort}`
      const settings = { ...settingsFor(port, "development"), dataDir: mkdtempSync(join(tmpdir(), "cairn-devauth-")) }
      const context = yield* Layer.build(
        Layer.merge(layer.pipe(Layer.provide(DevIssuerLive)), IdentityLive.pipe(Layer.provide(DevFallbackIssuer))).pipe(
          Layer.provide([
            Settings.layer(settings),
            Deployment.layer(trackerDeployment)
          ]),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", issuer]]))))
        )
      )
      assert.strictEqual(context.unsafeMap.get(DevAuthServer.key).issuer, issuer)
      const identity = context.unsafeMap.get(Identity.key) as Identity["Type"]
      assert.isTrue(existsSync(devKeyPath(settings.dataDir)))

      const reg = yield* register(issuer, { grant_types: ["client_credentials"], response_types: [], redirect_uris: [], org: "acme", roles: "admin" })
      const token = yield* clientCredentials(issuer, reg.body, { resource: `${settings.baseUrl}/mcp`, scope: "cairn:read" })
      const principal = yield* identity.verify(token.body["access_token"], "mcp")
      assert.strictEqual(principal.subject, reg.body["client_id"])
      assert.strictEqual(principal.databaseKey, "acme")
      assert.deepStrictEqual(principal.roles, ["admin"])
      assert.deepStrictEqual(principal.scopes, ["cairn:read"])
      const wrongResource = yield* Effect.either(identity.verify(token.body["access_token"], "db"))
      assert.isTrue(wrongResource._tag === "Left" && wrongResource.left.description === "The access token was issued for a different resource.")
    })
  )

  it.scoped("DevAuthServerLive starts nothing when an external issuer is configured", () =>
    Effect.gen(function* () {
      const port = yield* freePort()
      const asPort = yield* freePort()
      const settings = { ...settingsFor(port, "production"), dataDir: mkdtempSync(join(tmpdir(), "cairn-devauth-")) }
      yield* Layer.build(
        DevAuthServerLive.pipe(
          Layer.provide(Settings.layer(settings)),
          Layer.provide(
            Layer.setConfigProvider(
              ConfigProvider.fromMap(new Map([["CAIRN_ISSUER", "https://login.example.com"], ["CAIRN_DEV_ISSUER_URL", `http://127.0.0.1:${asPort}`]]))
            )
          )
        )
      )
      const reached = yield* Effect.promise(() => fetch(`http://127.0.0.1:${asPort}/.well-known/openid-configuration`).then(() => true, () => false))
      assert.isFalse(reached)
      assert.isFalse(existsSync(devKeyPath(settings.dataDir)))

      const refused = yield* Effect.exit(
        Layer.build(DevAuthServerLive.pipe(Layer.provide(Settings.layer(settings)), Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))))
      )
      assert.isTrue(Exit.isFailure(refused))
    })
  )
})

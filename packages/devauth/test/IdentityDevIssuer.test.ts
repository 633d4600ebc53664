// The development issuer: its key is created once (mode 0600) and shared by every
// process; the server trusts it outside production and refuses it in production; tokens
// from the token script and from the development authorization server verify alike.
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer } from "effect"
import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader } from "jose"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Deployment } from "@cairn/server/engine/Deployment"
import { Identity } from "@cairn/server/auth/Identity"
import { IdentityLive } from "@cairn/server/auth/IdentityLive"
import { Settings, type SettingsShape } from "@cairn/server/operations/Settings"
import { layerWith as devAuthServer } from "../src/DevAuthServer.js"
import { DevFallbackIssuer } from "../src/DevIdentity.js"
import { devIssuer, DevIssuerLive, devKeyPath, loadOrCreateDevKey, signDevToken } from "../src/DevIssuer.js"
import { issuerRecordPath } from "../src/DevToken.js"
import { freePort } from "@cairn/testkit/freePort"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")

const freshDir = () => mkdtempSync(join(tmpdir(), "cairn-dev-issuer-"))

const settingsFor = (dataDir: string, port: number, stageSetting = "development"): SettingsShape => ({
  port,
  host: "127.0.0.1",
  baseUrl: `http://127.0.0.1:${port}`,
  dataDir,
  stageSetting,
  stage: (["development", "test", "staging", "production"] as const).find((s) => s === stageSetting),
  stageExplicit: true,
  testHooksSetting: undefined
})

const deployment = Deployment.layer(trackerDeployment)

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

/** The server's identity as `npm start` builds it from these settings. */
const serverIdentity = (s: SettingsShape, env: Record<string, string> = {}) =>
  Identity.pipe(
    Effect.provide(IdentityLive.pipe(Layer.provide(DevFallbackIssuer), Layer.provide(Layer.merge(Settings.layer(s), deployment)))),
    withEnv(env)
  )

describe("DevIssuer key", () => {
  it.effect("is created once, private to its owner, and reloaded unchanged", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      const first = yield* loadOrCreateDevKey(dir)
      const file = devKeyPath(dir)
      assert.strictEqual(statSync(file).mode & 0o777, 0o600)
      assert.strictEqual(statSync(dirname(file)).mode & 0o777, 0o700)
      const again = yield* loadOrCreateDevKey(dir)
      assert.deepStrictEqual(again, first)
      assert.strictEqual(first.kid, yield* Effect.promise(() => calculateJwkThumbprint(first.publicJwk)))
      assert.notProperty(first.publicJwk, "d")
      assert.property(first.privateJwk, "d")
      assert.strictEqual(first.privateJwk.alg, "ES256")
      assert.deepStrictEqual(JSON.parse(readFileSync(file, "utf8")), first.privateJwk)
    }))

  it.effect("concurrent first uses agree on one key", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      const loaded = yield* Effect.all(Array.from({ length: 8 }, () => loadOrCreateDevKey(dir)), { concurrency: "unbounded" })
      assert.strictEqual(new Set(loaded.map((k) => k.kid)).size, 1)
    }))

  it.effect("a damaged key file is reported, not replaced", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      mkdirSync(join(dir, "dev-issuer"))
      writeFileSync(devKeyPath(dir), "{ not json")
      const error = yield* Effect.flip(loadOrCreateDevKey(dir))
      assert.strictEqual(error._tag, "DevIssuerError")
      assert.include(error.message, "delete it to have a new one created")
      assert.strictEqual(readFileSync(devKeyPath(dir), "utf8"), "{ not json")
    }))

})

describe("DevIssuer in the server", () => {
  it.effect("is never the fallback in production or an unknown stage", () =>
    Effect.gen(function* () {
      for (const s of [settingsFor(freshDir(), 18_787, "production"), settingsFor(freshDir(), 18_787, "prod")]) {
        const error = yield* Effect.flip(serverIdentity(s))
        assert.strictEqual(error._tag, "IdentityConfigError")
        assert.include((error as { message: string }).message, `does not run in stage "${s.stageSetting}"`)
        assert.include((error as { message: string }).message, "CAIRN_ISSUER")
      }
    }))

  it.effect("is trusted outside production: its tokens verify for their resource only", () =>
    Effect.gen(function* () {
      const s = settingsFor(freshDir(), 18_787)
      const identity = yield* serverIdentity(s)
      const issuer = yield* devIssuer.pipe(Effect.provideService(Settings, s), withEnv({}))
      assert.strictEqual(issuer.issuer, "http://127.0.0.1:18788")
      const token = yield* signDevToken(issuer, {
        subject: "alice",
        audience: `${s.baseUrl}/db`,
        claims: { org: "acme", roles: ["admin"] },
        scope: accessScopes.join(" "),
        ttlSeconds: 60
      })
      const principal = yield* identity.verify(token, "db")
      assert.deepStrictEqual([principal.subject, principal.databaseKey, principal.roles, principal.scopes], ["alice", "acme", ["admin"], ["cairn:read", "cairn:write"]])
      assert.strictEqual((yield* Effect.flip(identity.verify(token, "mcp"))).description, "The access token was issued for a different resource.")
      assert.strictEqual(decodeProtectedHeader(token).kid, issuer.key.kid)
    }))

  it.effect("uses CAIRN_DEV_ISSUER_URL as the issuer identifier", () =>
    Effect.gen(function* () {
      const s = settingsFor(freshDir(), 18_800, "test")
      const env = { CAIRN_DEV_ISSUER_URL: "http://127.0.0.1:9999/" }
      const identity = yield* serverIdentity(s, env)
      const issuer = yield* devIssuer.pipe(Effect.provideService(Settings, s), withEnv(env))
      assert.strictEqual(issuer.issuer, "http://127.0.0.1:9999")
      const token = yield* signDevToken(issuer, { subject: "bob", audience: `${s.baseUrl}/mcp`, claims: { org: "beta" }, scope: "cairn:read", ttlSeconds: 60 })
      assert.strictEqual((yield* identity.verify(token, "mcp")).databaseKey, "beta")
      // Signed with the right key but naming the default issuer: not trusted.
      const other = yield* signDevToken({ ...issuer, issuer: "http://127.0.0.1:18801" }, { subject: "bob", audience: `${s.baseUrl}/mcp`, claims: { org: "beta" }, scope: "", ttlSeconds: 60 })
      assert.strictEqual((yield* Effect.flip(identity.verify(other, "mcp"))).description, "The access token's issuer is not trusted here.")
    }))

  it.effect("refuses to start in production, and creates no key there", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      const s = settingsFor(dir, 18_810, "production")
      const exit = yield* Effect.exit(Layer.build(DevIssuerLive.pipe(Layer.provide(Settings.layer(s)))).pipe(Effect.scoped, withEnv({})))
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(devIssuer.pipe(Effect.provideService(Settings, s), withEnv({})))
      assert.strictEqual(error._tag, "DevIssuerError")
      assert.strictEqual(
        (error as { message: string }).message,
        `The development issuer does not run in stage "production"; configure an external issuer (CAIRN_ISSUER with CAIRN_JWKS_URL or CAIRN_JWKS).`
      )
      assert.isFalse(existsSync(devKeyPath(dir)))
    }))
})

const runTokenScript = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(
      process.execPath,
      ["--conditions=@cairn/source", "--import", "tsx", "scripts/token.ts", ...args],
      { cwd: root, env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "", ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resume(Effect.succeed({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }))
    )
  })

/** What a running development server leaves in its data directory for the token command. */
const writeIssuerRecord = (dir: string, record: { issuer: string; baseUrl: string; pid?: number }) =>
  writeFileSync(issuerRecordPath(dir), JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString(), ...record }))

describe("token script", () => {
  it.live("prints only a token the server running on the data directory accepts", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      const port = 18_820
      const env = { CAIRN_DATA_DIR: dir, CAIRN_PORT: String(port), CAIRN_STAGE: "development" }
      const identity = yield* serverIdentity(settingsFor(dir, port))
      writeIssuerRecord(dir, { issuer: `http://127.0.0.1:${port + 1}`, baseUrl: `http://127.0.0.1:${port}` })
      const { code, stdout, stderr } = yield* runTokenScript(["--sub", "alice", "--org", "acme", "--roles", "admin editor", "--resource", "mcp", "--scope", "cairn:read", "--ttl", "120"], env)
      assert.strictEqual(code, 0, stderr)
      assert.match(stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/)
      const token = stdout.trim()
      const claims = decodeJwt(token)
      assert.strictEqual(claims.exp! - claims.iat!, 120)
      const principal = yield* identity.verify(token, "mcp")
      assert.deepStrictEqual([principal.subject, principal.databaseKey, principal.roles, principal.scopes], ["alice", "acme", ["admin", "editor"], ["cairn:read"]])

      // Defaults: every scope, the data plane, no roles; the server's base URL without CAIRN_PORT.
      const plain = yield* runTokenScript(["--sub", "bob", "--org", "beta"], { CAIRN_DATA_DIR: dir })
      assert.strictEqual(plain.code, 0, plain.stderr)
      const bob = yield* identity.verify(plain.stdout.trim(), "db")
      assert.deepStrictEqual([bob.subject, bob.databaseKey, bob.roles, bob.scopes], ["bob", "beta", [], ["cairn:read", "cairn:write"]])

      // A base URL the running server does not serve: refused, both named.
      const elsewhere = yield* runTokenScript(["--sub", "bob", "--org", "beta"], { CAIRN_DATA_DIR: dir, CAIRN_BASE_URL: "http://localhost:7000" })
      assert.strictEqual(elsewhere.code, 1)
      assert.strictEqual(elsewhere.stdout, "")
      assert.include(elsewhere.stderr, `serves http://127.0.0.1:${port}, not http://localhost:7000 (from CAIRN_BASE_URL)`)
    }))

  it.live("fails without output on bad arguments, without a running server, and with an external issuer", () =>
    Effect.gen(function* () {
      const dir = freshDir()
      const missingOrg = yield* runTokenScript(["--sub", "alice"], { CAIRN_DATA_DIR: dir })
      assert.strictEqual(missingOrg.code, 1)
      assert.strictEqual(missingOrg.stdout, "")
      assert.include(missingOrg.stderr, "--org is required")
      const none = yield* runTokenScript(["--sub", "a", "--org", "b"], { CAIRN_DATA_DIR: dir })
      assert.strictEqual(none.code, 1)
      assert.strictEqual(none.stdout, "")
      assert.include(none.stderr, "No running Cairn development server uses the data directory")
      assert.isFalse(existsSync(devKeyPath(dir)), "no key is created")
      mkdirSync(dirname(issuerRecordPath(dir)), { recursive: true })
      writeIssuerRecord(dir, { issuer: "http://127.0.0.1:1", baseUrl: "http://127.0.0.1:2", pid: 2 ** 30 })
      const gone = yield* runTokenScript(["--sub", "a", "--org", "b"], { CAIRN_DATA_DIR: dir })
      assert.strictEqual(gone.code, 1)
      assert.include(gone.stderr, "is no longer running")
      const external = yield* runTokenScript(["--sub", "a", "--org", "b"], { CAIRN_DATA_DIR: dir, CAIRN_ISSUER: "https://login.example.com" })
      assert.strictEqual(external.code, 1)
      assert.include(external.stderr, "CAIRN_ISSUER is set")
    }))
})

describe("development authorization server and server identity", () => {
  it.scopedLive("tokens the authorization server issues with the shared key verify like the script's", () =>
    Effect.gen(function* () {
      const port = yield* freePort()
      const issuerPort = yield* freePort()
      const s = settingsFor(freshDir(), port, "test")
      const env = { CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${issuerPort}` }
      const issuer = yield* devIssuer.pipe(Effect.provideService(Settings, s), withEnv(env))
      yield* Layer.build(
        devAuthServer({ issuer: issuer.issuer, signingKey: issuer.key.privateJwk, resources: [`${s.baseUrl}/mcp`, `${s.baseUrl}/db`] }).pipe(
          Layer.provide(Settings.layer(s))
        )
      )
      const identity = yield* serverIdentity(s, env)
      const token = yield* Effect.promise(async () => {
        const registration = (await (
          await fetch(`${issuer.issuer}/reg`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ grant_types: ["client_credentials"], response_types: [], redirect_uris: [], org: "acme", roles: "admin" })
          })
        ).json()) as { client_id: string; client_secret: string }
        const response = await fetch(`${issuer.issuer}/token`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            authorization: `Basic ${Buffer.from(`${encodeURIComponent(registration.client_id)}:${encodeURIComponent(registration.client_secret)}`).toString("base64")}`
          },
          body: new URLSearchParams({ grant_type: "client_credentials", resource: `${s.baseUrl}/mcp`, scope: "cairn:read cairn:write" }).toString()
        })
        return ((await response.json()) as { access_token: string }).access_token
      })
      const principal = yield* identity.verify(token, "mcp")
      assert.strictEqual(principal.databaseKey, "acme")
      assert.deepStrictEqual(principal.roles, ["admin"])
      assert.deepStrictEqual([...principal.scopes].sort(), ["cairn:read", "cairn:write"])
      assert.strictEqual((yield* Effect.flip(identity.verify(token, "db"))).description, "The access token was issued for a different resource.")
    }))
})

// A real deployment for the MCP tests: the HTTP front on 127.0.0.1 serving McpRoutes, the
// development authorization server, identity verifying its tokens, and a DataPlane over a
// compiled catalog. Tokens come from the authorization server through its login page.
import { createHash, randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handler } from "@cairn/store"
import { McpConfig } from "@cairn/mcp/McpConfig"
import { McpRoutes } from "@cairn/mcp/McpRoutes"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { BearerGate } from "@cairn/server/http/BearerGate"
import { SealerLive } from "@cairn/server/auth/DeploymentSecret"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { DatabaseRouter } from "@cairn/server/engine/DatabaseRouter"
import { DatabasesLive } from "@cairn/server/engine/DatabasesLive"
import { Deployment, type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { EngineLimitsLive } from "@cairn/server/engine/EngineLimits"
import { FrontMiddleware } from "@cairn/server/http/FrontMiddleware"
import { IdentityLive } from "@cairn/server/auth/IdentityLive"
import { Limits } from "@cairn/server/http/Limits"
import { serve } from "@cairn/server/http/Server"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { DevAuthServer as DevAuth } from "@cairn/devauth"
import { DevFallbackIssuer } from "@cairn/devauth/DevIdentity"
import { DevIssuerLive } from "@cairn/devauth/DevIssuer"
import { trackerApplication } from "@cairn/testkit/fixture/application"
import { ConfigProvider, Effect, Layer } from "effect"
import { freePort } from "@cairn/testkit/freePort"

export interface Who {
  readonly sub: string
  readonly org: string
  readonly roles?: ReadonlyArray<string>
}

export interface Stack {
  /** The port the server binds (the base URL may name a proxy in front of it). */
  readonly port: number
  readonly issuerPort: number
  readonly base: string
  readonly issuer: string
  readonly mcpUrl: string
  readonly dataDir: string
  /** An access token from the dev authorization server (authorization code + PKCE via the login page). */
  readonly token: (who: Who, options?: { readonly scope?: string; readonly resource?: "mcp" | "db" }) => Effect.Effect<string>
  /** An SDK client connected with a bearer token (no OAuth dance). */
  readonly client: (token: string) => Effect.Effect<Client, never, import("effect").Scope.Scope>
}

export interface StackOptions {
  /** Root schema, policy and handlers; the tracker's by default. */
  readonly application?: Omit<DeploymentDefinition, "databases">
  /** Public base URL when it differs from the bind address (a proxy in front). */
  readonly basePort?: number
  /** Restart on an earlier stack's ports and data (its key, secret and databases). */
  readonly reuse?: { readonly port: number; readonly issuerPort: number; readonly dataDir: string }
  /** Replaces the engine (only to produce answers a real one gives under timing, e.g. overload). */
  readonly plane?: Layer.Layer<DataPlane>
}

/** An application over `root` where everyone reads everything and every operation is refused (for describe-only tests). */
export const openApplication = (root: RootSchema.RootSchema) => ({
  root,
  policy: Policy.make({
    entities: root.entities.map((e) => Policy.entity(e, { read: Rule.always })),
    operations: root.operations.map((o) => Policy.operation(o))
  }),
  handlers: Object.fromEntries(
    root.operations.map((o) => [`${o.owner}.${o.name}`, () => Handler.reject("This test application stores nothing.")])
  )
})

export const startStack = (options: StackOptions = {}) =>
  Effect.gen(function* () {
    const port = options.reuse?.port ?? (yield* freePort())
    const issuerPort = options.reuse?.issuerPort ?? (yield* freePort())
    const base = `http://127.0.0.1:${options.basePort ?? port}`
    const issuer = `http://127.0.0.1:${issuerPort}`
    const dataDir = options.reuse?.dataDir ?? mkdtempSync(join(tmpdir(), "cairn-mcp-"))
    // The public base URL may be a proxy's port (`basePort`), not the one bound.
    const settings = { ...onLoopback({ port, dataDir }), baseUrl: base }
    const application = options.application ?? trackerApplication
    const DeploymentLive = Deployment.layer({ ...application, databases: [{ name: "tenants", schema: application.root.name, keyClaim: "org" }] })
    const PlaneLive = options.plane ?? DataPlane.Default.pipe(Layer.provide(EngineLimitsLive), Layer.provide([DatabaseRouter.local, DatabasesLive]))

    // Assembled as the entry point does: the front's middleware, identity trusting the
    // development issuer, and the development authorization server signing with its key.
    const app = Layer.mergeAll(
      serve(Layer.mergeAll(McpRoutes, FrontMiddleware)).pipe(
        Layer.provide([McpConfig.layerConfig, PlaneLive, BearerGate.Default, Limits.layer()]),
        Layer.provide(IdentityLive),
        Layer.provide(DevFallbackIssuer)
      ),
      DevAuth.layer.pipe(Layer.provide(DevIssuerLive))
    ).pipe(
      Layer.provide(SealerLive),
      Layer.provide([Settings.layer(settings), DeploymentLive]),
      Layer.provide(
        Layer.setConfigProvider(
          ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", issuer], ["CAIRN_SQLITE_SYNCHRONOUS", "NORMAL"]]))
        )
      )
    )
    yield* Layer.build(app)
    if (options.reuse) {
      // Sockets pooled by fetch to the previous servers on these ports may still look
      // open; idempotent probes use them up before anything that must not fail.
      for (const url of [`${issuer}/.well-known/openid-configuration`, `http://127.0.0.1:${port}/health`]) {
        yield* Effect.tryPromise(() => fetch(url).then((r) => r.arrayBuffer())).pipe(Effect.retry({ times: 10 }), Effect.orDie)
      }
    }

    const redirectUri = "http://127.0.0.1:9/callback"
    const registration = yield* Effect.promise(async () => {
      const response = await fetch(`${issuer}/reg`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ client_name: "cairn-tests", redirect_uris: [redirectUri], token_endpoint_auth_method: "none" })
      })
      return (await response.json()) as { client_id: string }
    })

    const token: Stack["token"] = (who, tokenOptions = {}) =>
      Effect.gen(function* () {
        const verifier = randomBytes(32).toString("base64url")
        const challenge = createHash("sha256").update(verifier).digest("base64url")
        const resource = `${base}/${tokenOptions.resource ?? "mcp"}`
        const url = `${issuer}/auth?${new URLSearchParams({
          response_type: "code",
          client_id: registration.client_id,
          redirect_uri: redirectUri,
          scope: tokenOptions.scope ?? "cairn:read cairn:write",
          resource,
          code_challenge: challenge,
          code_challenge_method: "S256"
        })}`
        const back = yield* DevAuth.signIn(url, who).pipe(Effect.orDie)
        return yield* Effect.promise(async () => {
          const response = await fetch(`${issuer}/token`, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({
              grant_type: "authorization_code",
              code: back.searchParams.get("code") ?? "",
              redirect_uri: redirectUri,
              client_id: registration.client_id,
              code_verifier: verifier,
              resource
            }).toString()
          })
          const body = (await response.json()) as { access_token?: string }
          if (!body.access_token) throw new Error(`no token: ${JSON.stringify(body)}`)
          return body.access_token
        })
      })

    const client: Stack["client"] = (bearer) =>
      Effect.acquireRelease(
        Effect.promise(async () => {
          const c = new Client({ name: "cairn-tests", version: "1.0.0" })
          await c.connect(
            new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
              requestInit: { headers: { authorization: `Bearer ${bearer}` } }
            })
          )
          return c
        }),
        (c) => Effect.promise(() => c.close())
      )

    const stack: Stack = { port, issuerPort, base, issuer, mcpUrl: `${base}/mcp`, dataDir, token, client }
    return stack
  })

/** A raw JSON-RPC POST to the endpoint, returning status, headers and parsed body. */
export const post = (
  url: string,
  body: unknown,
  headers: Record<string, string> = {}
) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers
      },
      body: JSON.stringify(body)
    })
    const text = await response.text()
    let json: any = undefined
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, text, json }
  })

export const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
}

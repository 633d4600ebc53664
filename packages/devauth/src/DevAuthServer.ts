/**
 * The development OAuth authorization server (oidc-provider) that lets real MCP clients
 * connect to a fresh install: discovery, dynamic registration, authorization code + PKCE,
 * client_credentials, and JWT access tokens bound to one resource (RFC 8707), signed with
 * the development issuer's key. A login page picks subject, org and roles. Memory only.
 */
import { randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { JWK } from "jose"
import type { Client, KoaContextWithOIDC } from "oidc-provider"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Context, Data, Effect, Layer, Option, Runtime } from "effect"
import { DevIssuer, devIssuer } from "./DevIssuer.js"
import { externalIssuer } from "@cairn/server/auth/FallbackIssuer"
import { Settings } from "@cairn/server/operations/Settings"

/** Refused to start: the development authorization server never runs in production. */
export class DevAuthServerError extends Data.TaggedError("DevAuthServerError")<{ readonly message: string }> {}

export interface DevAuthServerOptions {
  /** Issuer identifier; the server listens on its host and port. */
  readonly issuer: string
  /** Private signing JWK (ES256, with `kid`): the development issuer's key. */
  readonly signingKey: JWK
  /** Resource indicators tokens may be issued for, e.g. `{base}/mcp` and `{base}/db`. */
  readonly resources: ReadonlyArray<string>
  /**
   * Public clients (no secret: authorization code + PKCE from a browser) registered up front, e.g.
   * the demo page served at the deployment's `/`. Their redirect URIs' origins may call the token
   * endpoint cross-origin (oidc-provider's client-based CORS).
   */
  readonly publicClients?: ReadonlyArray<{ readonly clientId: string; readonly redirectUris: ReadonlyArray<string> }>
}

/** The demo page's client: `{base}/` signs in with authorization code + PKCE in the browser. */
export const demoClientId = "cairn-demo"

export interface DevAuthServerShape {
  readonly issuer: string
  /** The URL the server actually listens on (equals the issuer unless it asked for port 0). */
  readonly url: string
}

export class DevAuthServer extends Context.Tag("@cairn/devauth/DevAuthServer")<DevAuthServer, DevAuthServerShape>() {}


const claimName = /^[A-Za-z0-9_.:@+-]{1,200}$/

/** Subject, org and roles chosen at login, kept per grant so every token of it carries them. */
interface Chosen {
  readonly org: string
  readonly roles: ReadonlyArray<string>
}

const splitRoles = (value: unknown): ReadonlyArray<string> =>
  (Array.isArray(value) ? value.map(String) : typeof value === "string" ? value.split(/[\s,]+/) : []).filter((r) => r !== "")

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const readForm = (req: IncomingMessage): Promise<URLSearchParams> =>
  new Promise((resolve, reject) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => {
      body += chunk
      if (body.length > 16_384) req.destroy(new Error("form too large"))
    })
    req.on("end", () => resolve(new URLSearchParams(body)))
    req.on("error", reject)
  })

const page = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title><link rel="icon" href="data:,">
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}label{display:block;margin:.8rem 0}input{width:100%;padding:.4rem}button{margin-top:1rem;padding:.5rem 1rem}code{background:#eee;padding:0 .2rem}</style>
</head><body>${body}</body></html>`

const loginPage = (uid: string, client: string, resource: string, scope: string, problem?: string) =>
  page(
    "Cairn development login",
    `<h1>Cairn development login</h1>
<p>Development only: anyone can sign in as anyone. <code>${escapeHtml(client)}</code> asks for
<code>${escapeHtml(scope || "(no scope)")}</code> on <code>${escapeHtml(resource || "(no resource)")}</code>.</p>
${problem ? `<p role="alert"><strong>${escapeHtml(problem)}</strong></p>` : ""}
<form method="post" action="/interaction/${encodeURIComponent(uid)}">
<label>Subject (sub) <input name="sub" value="alice" required></label>
<label>Organization (org: selects the database) <input name="org" value="acme" required></label>
<label>Roles (space separated, e.g. admin) <input name="roles" value=""></label>
<button type="submit">Sign in and allow</button>
</form>`
  )

type OidcProvider = typeof import("oidc-provider")

/**
 * Loads oidc-provider only when a development authorization server starts (production
 * assemblies never load it), and keeps its development-only console warnings (Node
 * version, in-memory adapter, development keys) out of the operator's output: they are
 * logged at debug level instead, once.
 */
const quietly = async <A>(load: () => A | Promise<A>): Promise<{ readonly value: A; readonly warnings: ReadonlyArray<string> }> => {
  const warnings: Array<string> = []
  const warn = console.warn
  console.warn = (...args: ReadonlyArray<unknown>) => void warnings.push(args.map(String).join(" "))
  try {
    return { value: await load(), warnings }
  } finally {
    console.warn = warn
  }
}

/** Builds the provider and its HTTP handler (the login pages in front of oidc-provider). */
export const makeProvider = (oidc: OidcProvider, options: DevAuthServerOptions) => {
  const { default: Provider, errors } = oidc
  const resources = new Set(options.resources)
  const chosen = new Map<string, Chosen>()
  const kid = options.signingKey.kid
  const provider = new Provider(options.issuer, {
    clients: (options.publicClients ?? []).map((c) => ({
      client_id: c.clientId,
      redirect_uris: [...c.redirectUris],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      response_types: ["code"]
    })),
    jwks: { keys: [options.signingKey as any] },
    // Browsers may call the token endpoint only from a public client's own redirect origins.
    clientBasedCORS: (_ctx, origin, client) =>
      client.clientAuthMethod === "none" && (client.redirectUris ?? []).some((uri) => URL.canParse(uri) && new URL(uri).origin === origin),
    cookies: { keys: [randomBytes(32).toString("base64url")] },
    scopes: ["openid", "offline_access", ...accessScopes],
    claims: { openid: ["sub"] },
    clientDefaults: {
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
      id_token_signed_response_alg: "ES256"
    },
    extraClientMetadata: {
      // client_credentials tokens have no login: the client's registration names their org and roles.
      properties: ["org", "roles"],
      validator: (_ctx, key, value) => {
        if (value === undefined) return
        if (key === "org" && (typeof value !== "string" || !claimName.test(value))) {
          throw new errors.InvalidClientMetadata("org must be a short identifier")
        }
        if (key === "roles" && !splitRoles(value).every((r) => claimName.test(r))) {
          throw new errors.InvalidClientMetadata("roles must be short identifiers")
        }
      }
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Clients that name no resource get the MCP endpoint, the one this server exists for.
        defaultResource: (_ctx, _client, oneOf) => oneOf?.[0] ?? options.resources[0],
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resourceIndicator) => {
          if (!resources.has(resourceIndicator)) throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`)
          return {
            scope: accessScopes.join(" "),
            audience: resourceIndicator,
            accessTokenTTL: 3600,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256", ...(kid ? { kid } : {}) } }
          }
        }
      }
    },
    pkce: { required: () => true },
    ttl: {
      AccessToken: 3600,
      AuthorizationCode: 60,
      ClientCredentials: 3600,
      Grant: 86_400,
      IdToken: 3600,
      Interaction: 600,
      RefreshToken: 86_400,
      Session: 86_400
    },
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    extraTokenClaims: (ctx: KoaContextWithOIDC, token) => {
      if (token.kind === "ClientCredentials") {
        const client = ctx.oidc.client as (Client & { org?: unknown; roles?: unknown }) | undefined
        return typeof client?.org === "string" ? { org: client.org, roles: splitRoles(client.roles) } : undefined
      }
      const choice = token.grantId ? chosen.get(token.grantId) : undefined
      return choice ? { org: choice.org, roles: [...choice.roles] } : undefined
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError: (ctx, out) => {
      ctx.type = "html"
      ctx.body = page("Sign-in error", `<h1>Sign-in error</h1><p>${escapeHtml(String(out.error))}: ${escapeHtml(String(out.error_description ?? ""))}</p>`)
    }
  })
  const callback = provider.callback()

  const interaction = async (req: IncomingMessage, res: ServerResponse, uid: string) => {
    const details = await provider.interactionDetails(req, res)
    if (details.uid !== uid) throw new errors.SessionNotFound("interaction mismatch")
    const params = details.params as Record<string, unknown>
    const requestedScope = String(params["scope"] ?? "")
    const resource = typeof params["resource"] === "string" ? params["resource"] : Array.isArray(params["resource"]) ? String(params["resource"][0]) : options.resources[0]!
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
      res.end(loginPage(uid, String(params["client_id"]), resource, requestedScope))
      return
    }
    const form = await readForm(req)
    const sub = (form.get("sub") ?? "").trim()
    const org = (form.get("org") ?? "").trim()
    const roles = splitRoles(form.get("roles") ?? "")
    if (!claimName.test(sub) || !claimName.test(org) || !roles.every((r) => claimName.test(r))) {
      res.writeHead(400, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
      res.end(loginPage(uid, String(params["client_id"]), resource, requestedScope, "Subject, org and roles must be short identifiers (letters, digits, _ . : @ + -)."))
      return
    }
    const grant = new provider.Grant({ accountId: sub, clientId: String(params["client_id"]) })
    const asked = requestedScope.split(" ").filter((s) => s !== "")
    // Everything asked for is granted: picking who you are is the whole point of this page.
    // Cairn scopes are also listed as provider scopes (for discovery), so the grant names
    // them both as such and for the resource the token will be bound to.
    const known = asked.filter((s) => ["openid", "offline_access", ...accessScopes].includes(s))
    if (known.length > 0) grant.addOIDCScope(known.join(" "))
    const cairnScopes = asked.filter((s) => (accessScopes as ReadonlyArray<string>).includes(s))
    grant.addResourceScope(resource, (cairnScopes.length > 0 ? cairnScopes : [...accessScopes]).join(" "))
    const grantId = await grant.save()
    chosen.set(grantId, { org, roles })
    await provider.interactionFinished(req, res, { login: { accountId: sub }, consent: { grantId } }, { mergeWithLastSubmission: false })
  }

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const match = /^\/interaction\/([A-Za-z0-9_-]+)$/.exec(new URL(req.url ?? "/", "http://x").pathname)
    if (match && (req.method === "GET" || req.method === "POST")) {
      interaction(req, res, match[1]!).catch((error: unknown) => {
        if (res.headersSent) return res.end()
        const status = error instanceof errors.OIDCProviderError ? error.statusCode : 500
        res.writeHead(status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
        res.end(page("Sign-in error", `<h1>Sign-in error</h1><p>${escapeHtml(error instanceof errors.OIDCProviderError ? error.error_description ?? error.message : "The sign-in failed; start again from your client.")}</p>`))
      })
      return
    }
    callback(req, res)
  }
  return { provider, handler }
}

/** Starts the server on the issuer's host and port for the lifetime of the scope. */
export const make = (options: DevAuthServerOptions) =>
  Effect.gen(function* () {
    const oidc = yield* Effect.promise(() => quietly(() => import("oidc-provider") as Promise<OidcProvider>))
    const built = yield* Effect.promise(() => quietly(() => makeProvider(oidc.value, options)))
    yield* Effect.forEach([...oidc.warnings, ...built.warnings], (w) => Effect.logDebug(w), { discard: true })
    const { handler } = built.value
    const url = new URL(options.issuer)
    const hostname = url.hostname.replace(/^\[|\]$/g, "")
    const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
    const server = yield* Effect.acquireRelease(
      Effect.flatMap(Effect.runtime<never>(), (runtime) => Effect.async<HttpServer, DevAuthServerError>((resume) => {
        const server = createServer(handler)
        let listening = false
        // Before listening, a failure to start; after, logged: an unheard 'error' would exit the process.
        server.on("error", (error) =>
          listening
            ? Runtime.runFork(runtime)(Effect.logError("the development authorization server failed", error))
            : resume(Effect.fail(new DevAuthServerError({ message: `The development authorization server cannot listen on ${url.host}: ${error.message}` })))
        )
        server.listen(port, hostname, () => {
          listening = true
          resume(Effect.succeed(server))
        })
      })),
      (server) =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )
    const address = server.address() as AddressInfo
    const shape: DevAuthServerShape = {
      issuer: options.issuer,
      url: `${url.protocol}//${url.hostname}:${address.port}`
    }
    yield* Effect.logDebug(`Development authorization server at ${options.issuer} (development only: anyone can sign in as anyone)`)
    return shape
  })

const refuseProduction = Effect.gen(function* () {
  const settings = yield* Settings
  if (settings.stage === "production" || settings.stage === undefined) {
    return yield* new DevAuthServerError({
      message: `The development authorization server does not run in stage "${settings.stageSetting}"; configure an external issuer (CAIRN_ISSUER) instead.`
    })
  }
  return settings
})

/** The resources of this deployment tokens may be bound to: `{base}/mcp` first (the default), then `{base}/db`. */
const resourcesOf = (baseUrl: string) => [`${baseUrl}/mcp`, `${baseUrl}/db`]

/** The demo page at `{base}/`, registered as a public client. */
const demoClientsOf = (baseUrl: string) => [{ clientId: demoClientId, redirectUris: [`${baseUrl}/`] }]

/**
 * The server as a scoped layer with explicit options. Refuses to start in `production`
 * (and in an unrecognized stage), where the operator configures an external issuer.
 */
export const layerWith = (options: DevAuthServerOptions) =>
  Layer.scoped(DevAuthServer, Effect.zipRight(refuseProduction, make(options)))

/** The server at the development issuer's URL, signing with its key (`DevIssuer`). */
export const layer = Layer.scoped(
  DevAuthServer,
  Effect.gen(function* () {
    const settings = yield* refuseProduction
    const dev = yield* DevIssuer
    return yield* make({
      issuer: dev.issuer,
      signingKey: dev.key.privateJwk,
      resources: resourcesOf(settings.baseUrl),
      publicClients: demoClientsOf(settings.baseUrl)
    })
  })
)

/**
 * What `npm start` runs: the development authorization server unless the operator
 * configured an external issuer (`CAIRN_ISSUER`), in which case nothing starts. Without
 * one in `production` it fails, as the development issuer itself does.
 */
export const DevAuthServerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    if (Option.isSome(yield* externalIssuer)) return
    const settings = yield* refuseProduction
    const dev = yield* devIssuer
    yield* make({
      issuer: dev.issuer,
      signingKey: dev.key.privateJwk,
      resources: resourcesOf(settings.baseUrl),
      publicClients: demoClientsOf(settings.baseUrl)
    })
  })
)

/**
 * Signs in on the development login page without a browser: follows `authorizationUrl`
 * through the login form as `who` and returns the final redirect (to the client's
 * `redirect_uri`, carrying `code` or `error`). For tests and headless scripts.
 */
export const signIn = (
  authorizationUrl: string | URL,
  who: { readonly sub: string; readonly org: string; readonly roles?: ReadonlyArray<string> }
): Effect.Effect<URL, DevAuthServerError> =>
  Effect.tryPromise({
    try: async () => {
      const jar = new Map<string, string>()
      const step = async (url: URL, init: RequestInit = {}) => {
        const response = await fetch(url, {
          ...init,
          redirect: "manual",
          headers: { ...(init.headers as Record<string, string>), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") }
        })
        for (const cookie of response.headers.getSetCookie()) {
          const pair = cookie.split(";")[0]!
          const eq = pair.indexOf("=")
          jar.set(pair.slice(0, eq), pair.slice(eq + 1))
        }
        await response.arrayBuffer()
        return response
      }
      let url = new URL(authorizationUrl)
      const origin = url.origin
      for (let hops = 0; hops < 10; hops++) {
        const isLogin = url.origin === origin && url.pathname.startsWith("/interaction/")
        const response = isLogin
          ? await step(url, {
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded" },
              body: new URLSearchParams({ sub: who.sub, org: who.org, roles: (who.roles ?? []).join(" ") }).toString()
            })
          : await step(url)
        const location = response.headers.get("location")
        if (location === null) throw new Error(`sign-in stopped at ${url.pathname} with HTTP ${response.status}`)
        url = new URL(location, url)
        if (url.origin !== origin) return url
      }
      throw new Error("sign-in did not finish within 10 redirects")
    },
    catch: (error) => new DevAuthServerError({ message: `Development sign-in failed: ${error instanceof Error ? error.message : String(error)}` })
  })

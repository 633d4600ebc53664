/**
 * The demo page `npm start` serves at `/`: static HTML and CSS, the browser script bundled from
 * `apps/server/web/demo.ts` with esbuild on first request (kept in memory, no build artifacts), and
 * the sign-in configuration (the issuer's endpoints and the public client `cairn-demo`). Only these
 * exact paths are added: `/db/*`, `/mcp` and everything else keep their own gates.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { demoClientId } from "@cairn/devauth/DevAuthServer"
import { devIssuerUrl } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { externalIssuer } from "@cairn/server/auth/FallbackIssuer"
import { Settings } from "@cairn/server/operations/Settings"
import { Effect, Layer, Option } from "effect"

const web = (file: string) => fileURLToPath(new URL(`../web/${file}`, import.meta.url))

/** What the page may load and call: itself, and the issuer's token endpoint. */
const securityHeaders = (issuer: string) => ({
  "content-security-policy": [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self' ${new URL(issuer).origin}`,
    `form-action 'self' ${new URL(issuer).origin}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "object-src 'none'"
  ].join("; "),
  "x-content-type-options": "nosniff",
  // The authorization code arrives in the URL: never send it on as a referrer.
  "referrer-policy": "no-referrer"
})

/** Bundles the page's script for browsers, from the workspace sources. */
const bundle = Effect.tryPromise({
  try: async () => {
    const esbuild = await import("esbuild")
    const result = await esbuild.build({
      entryPoints: [web("demo.ts")],
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      conditions: ["@cairn/source"],
      minify: true,
      write: false,
      logLevel: "silent"
    })
    return result.outputFiles[0]!.text
  },
  catch: (error) => new Error(`The demo page's script could not be bundled: ${error instanceof Error ? error.message : String(error)}`)
})

export const DemoPage = Layer.unwrapEffect(
  Effect.gen(function* () {
    const settings = yield* Settings
    const external = yield* externalIssuer
    const issuer = Option.isSome(external) ? external.value.replace(/\/+$/, "") : yield* devIssuerUrl
    const headers = securityHeaders(issuer)
    const script = yield* Effect.cached(bundle)
    const html = readFileSync(web("index.html"), "utf8")
    const css = readFileSync(web("demo.css"), "utf8")
    const icon = readFileSync(web("favicon.svg"), "utf8")
    const config = {
      issuer,
      // oidc-provider's endpoints, as the development authorization server serves them.
      authorizationEndpoint: `${issuer}/auth`,
      tokenEndpoint: `${issuer}/token`,
      clientId: demoClientId,
      resource: `${settings.baseUrl}/db`,
      scope: ["openid", ...accessScopes].join(" ")
    }
    const text = (body: string, contentType: string) =>
      HttpServerResponse.text(body, { contentType, headers: { ...headers, "cache-control": "no-cache" } })
    return Layer.mergeAll(
      HttpLayerRouter.add("GET", "/", Effect.succeed(text(html, "text/html; charset=utf-8"))),
      // Browsers ask for /favicon.ico whatever the page links: answer it rather than log a 404.
      HttpLayerRouter.add("GET", "/favicon.ico", Effect.succeed(text(icon, "image/svg+xml"))),
      HttpLayerRouter.add("GET", "/demo.css", Effect.succeed(text(css, "text/css; charset=utf-8"))),
      HttpLayerRouter.add("GET", "/demo-config.json", Effect.succeed(text(JSON.stringify(config), "application/json"))),
      HttpLayerRouter.add(
        "GET",
        "/demo.js",
        Effect.map(Effect.orDie(script), (js) => text(js, "text/javascript; charset=utf-8"))
      )
    )
  })
)

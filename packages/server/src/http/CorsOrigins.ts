/**
 * The browser origins the operator lets call `/db/*` from other sites
 * (`CAIRN_CORS_ORIGINS`, comma or space separated, e.g. `https://app.example.com`). The
 * default is none: only same-origin pages and non-browser clients. Each entry must be an
 * exact origin (scheme, host, optional port; no path, no wildcard).
 */
import { Config, ConfigError, Either } from "effect"

export const corsOriginsConfig: Config.Config<ReadonlySet<string>> = Config.string("CAIRN_CORS_ORIGINS").pipe(
  Config.withDefault(""),
  Config.mapOrFail((raw) => {
    const origins = new Set<string>()
    for (const entry of raw.split(/[\s,]+/).filter((e) => e !== "")) {
      let url: URL | undefined
      try {
        url = new URL(entry)
      } catch {
        url = undefined
      }
      if (url === undefined || (url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== entry.replace(/\/$/, "")) {
        return Either.left(
          ConfigError.InvalidData(["CAIRN_CORS_ORIGINS"], `"${entry.slice(0, 80)}" is not an origin like https://app.example.com (scheme, host and port only)`)
        )
      }
      origins.add(url.origin)
    }
    return Either.right(origins)
  })
)

/**
 * What a route lets an allowed origin send (a preflight's answer): its methods and request
 * headers. The answers' own headers a page may read are one list for every `/db` route.
 */
export interface CorsRoute {
  readonly methods: string
  readonly headers: string
}

/** `/db/rpc` and `/db/sync`: POST with a bearer token and a JSON or NDJSON body. */
export const rpcCors: CorsRoute = { methods: "POST", headers: "authorization, content-type" }
/** `/db/objects`: a streamed upload (its name in `x-file-name`), a download (ranges, revalidation), a signed link. */
export const objectsCors: CorsRoute = { methods: "GET, POST", headers: "authorization, content-type, x-file-name, range, if-none-match" }
/** `/db/objects/resumable`: the TUS 1.0 requests tus-js-client sends. */
export const resumableCors: CorsRoute = {
  methods: "POST, HEAD, PATCH, DELETE",
  headers: "authorization, content-type, tus-resumable, upload-length, upload-defer-length, upload-metadata, upload-offset, upload-concat, x-http-method-override, x-requested-with"
}

/** Answer headers an allowed page may read: the front's, TUS's and a download's. */
const exposed = [
  "x-request-id",
  "www-authenticate",
  "retry-after",
  "location",
  "tus-resumable",
  "tus-version",
  "tus-extension",
  "tus-max-size",
  "upload-offset",
  "upload-length",
  "upload-metadata",
  "upload-expires",
  "etag",
  "content-range",
  "content-disposition",
  "accept-ranges"
].join(", ")

/** Response headers letting `origin` read an answer, or none when it is not allowed. */
export const corsHeaders = (allowed: ReadonlySet<string>, origin: string | undefined): Record<string, string> =>
  origin !== undefined && allowed.has(origin)
    ? {
        "access-control-allow-origin": origin,
        "access-control-expose-headers": exposed,
        vary: "Origin"
      }
    : {}

/** The answer to a preflight for `route` from an allowed origin. */
export const preflightHeaders = (origin: string, route: CorsRoute): Record<string, string> => ({
  "access-control-allow-origin": origin,
  "access-control-allow-methods": route.methods,
  "access-control-allow-headers": route.headers,
  "access-control-max-age": "600",
  vary: "Origin"
})

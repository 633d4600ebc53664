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

/** Response headers letting `origin` read an answer, or none when it is not allowed. */
export const corsHeaders = (allowed: ReadonlySet<string>, origin: string | undefined): Record<string, string> =>
  origin !== undefined && allowed.has(origin)
    ? {
        "access-control-allow-origin": origin,
        "access-control-expose-headers": "x-request-id, www-authenticate, retry-after",
        vary: "Origin"
      }
    : {}

/** The answer to a preflight for `/db/*` from an allowed origin: POST with a bearer token and a JSON or NDJSON body. */
export const preflightHeaders = (origin: string): Record<string, string> => ({
  "access-control-allow-origin": origin,
  "access-control-allow-methods": "POST",
  "access-control-allow-headers": "authorization, content-type",
  "access-control-max-age": "600",
  vary: "Origin"
})

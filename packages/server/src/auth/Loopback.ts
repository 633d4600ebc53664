/**
 * The one loopback rule: which host names and addresses never leave this machine. The
 * exposure guard, the JWKS-URL check and the Host/Origin check of the bearer gate all
 * ask it, so "local" means the same thing everywhere.
 */

/** The spellings of this machine a client may put in `Host`/`Origin` for a loopback base URL. */
export const loopbackNames: ReadonlyArray<string> = ["localhost", "127.0.0.1", "[::1]"]

/** `localhost`, `::1` (bracketed or not) or any address in 127.0.0.0/8. */
export const isLoopbackHost = (host: string): boolean => {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "")
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h)
}

/** The `host[:port]` spellings a request to `baseUrl` may carry (remembered for the last base URL asked about). */
export const allowedHosts = (baseUrl: string): ReadonlySet<string> => {
  if (lastHosts !== undefined && lastHosts.baseUrl === baseUrl) return lastHosts.hosts
  const hosts = hostsOf(baseUrl)
  lastHosts = { baseUrl, hosts }
  return hosts
}

let lastHosts: { readonly baseUrl: string; readonly hosts: ReadonlySet<string> } | undefined

const hostsOf = (baseUrl: string): ReadonlySet<string> => {
  const url = new URL(baseUrl)
  const port = url.port === "" ? "" : `:${url.port}`
  const names = isLoopbackHost(url.hostname) ? loopbackNames : [url.hostname.toLowerCase()]
  const hosts = new Set(names.map((n) => `${n}${port}`))
  // Default ports may be spelled out or omitted by clients.
  const defaultPort = url.protocol === "https:" ? ":443" : ":80"
  if (port === "") for (const n of names) hosts.add(`${n}${defaultPort}`)
  return hosts
}

/**
 * DNS-rebinding and cross-site protection: why a request whose `Host` or `Origin` does
 * not name `baseUrl` is refused, or `undefined` when both are ours (no `Origin`: not a
 * browser, or a same-origin navigation).
 */
export const foreignOrigin = (
  baseUrl: string,
  request: { readonly host: string | undefined; readonly origin: string | undefined }
): string | undefined => {
  const hosts = allowedHosts(baseUrl)
  if (request.host === undefined || !hosts.has(request.host.toLowerCase())) return "The Host header does not name this server."
  if (request.origin !== undefined) {
    let origin: URL
    try {
      origin = new URL(request.origin)
    } catch {
      return "The Origin header is not a valid origin."
    }
    if (origin.protocol !== new URL(baseUrl).protocol || !hosts.has(origin.host.toLowerCase())) {
      return "Requests from this Origin are not allowed."
    }
  }
  return undefined
}

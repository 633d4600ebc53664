/**
 * DNS-rebinding protection: a browser tricked into calling the endpoint sends a foreign
 * `Host` or `Origin`. Both must name the configured base URL; a loopback base URL also
 * accepts the other loopback spellings of the same port.
 */
const loopbackNames = ["localhost", "127.0.0.1", "[::1]"]

const isLoopbackName = (hostname: string): boolean => loopbackNames.includes(hostname.toLowerCase())

/** The `host[:port]` spellings a request to `baseUrl` may carry. */
export const allowedHosts = (baseUrl: string): ReadonlySet<string> => {
  const url = new URL(baseUrl)
  const port = url.port === "" ? "" : `:${url.port}`
  const names = isLoopbackName(url.hostname) ? loopbackNames : [url.hostname.toLowerCase()]
  const hosts = new Set(names.map((n) => `${n}${port}`))
  // Default ports may be spelled out or omitted by clients.
  const defaultPort = url.protocol === "https:" ? ":443" : ":80"
  if (port === "") for (const n of names) hosts.add(`${n}${defaultPort}`)
  return hosts
}

export interface OriginCheck {
  readonly host: string | undefined
  readonly origin: string | undefined
}

/** Why the request is refused, or `undefined` when its Host and Origin are ours. */
export const rejection = (baseUrl: string, request: OriginCheck): string | undefined => {
  const hosts = allowedHosts(baseUrl)
  if (request.host === undefined || !hosts.has(request.host.toLowerCase())) {
    return "The Host header does not name this server."
  }
  if (request.origin !== undefined) {
    let origin: URL
    try {
      origin = new URL(request.origin)
    } catch {
      return "The Origin header is not a valid origin."
    }
    const base = new URL(baseUrl)
    if (origin.protocol !== base.protocol || !hosts.has(origin.host.toLowerCase())) {
      return "Requests from this Origin are not allowed."
    }
  }
  return undefined
}

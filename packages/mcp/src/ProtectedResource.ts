/**
 * The MCP endpoint as an OAuth protected resource (RFC 9728): its metadata document and
 * the `WWW-Authenticate` challenges that point clients at it. Every URL is built from
 * the configured base URL, so a deployment behind a proxy advertises its public address.
 */
import { scopes } from "./McpTools.js"

/** The resource identifier tokens must name as their audience. */
export const resourceUrl = (baseUrl: string): string => `${baseUrl}/mcp`

export const metadataUrl = (baseUrl: string): string => `${baseUrl}/.well-known/oauth-protected-resource/mcp`

export interface ProtectedResourceMetadata {
  readonly resource: string
  readonly authorization_servers: ReadonlyArray<string>
  readonly scopes_supported: ReadonlyArray<string>
  readonly bearer_methods_supported: ReadonlyArray<string>
  readonly resource_name: string
}

export const metadata = (baseUrl: string, authorizationServers: ReadonlyArray<string>): ProtectedResourceMetadata => ({
  resource: resourceUrl(baseUrl),
  authorization_servers: authorizationServers,
  scopes_supported: scopes,
  // Only the Authorization header: tokens in URLs or bodies end up in logs and caches.
  bearer_methods_supported: ["header"],
  resource_name: "Cairn MCP endpoint"
})

const quoted = (value: string): string => `"${value.replace(/[\\"]/g, "\\$&")}"`

export interface Challenge {
  readonly error?: "invalid_request" | "invalid_token" | "insufficient_scope"
  readonly description?: string
  readonly scope?: ReadonlyArray<string>
}

/** A `Bearer` challenge (RFC 6750 §3) carrying the metadata URL (RFC 9728 §5.1). */
export const challenge = (baseUrl: string, options: Challenge = {}): string => {
  const params: Array<string> = []
  if (options.error) params.push(`error=${quoted(options.error)}`)
  if (options.description) params.push(`error_description=${quoted(options.description)}`)
  if (options.scope && options.scope.length > 0) params.push(`scope=${quoted(options.scope.join(" "))}`)
  params.push(`resource_metadata=${quoted(metadataUrl(baseUrl))}`)
  return `Bearer ${params.join(", ")}`
}

/**
 * The MCP endpoint as an OAuth protected resource (RFC 9728): its metadata document. Every
 * URL is built from the configured base URL, so a deployment behind a proxy advertises its
 * public address; the challenges pointing clients here are written by the bearer gate.
 */
import { accessScopes } from "@cairn/domain/AccessScope"
import { resourceMetadataUrl } from "@cairn/server/http/BearerGate"

/** The resource identifier tokens must name as their audience. */
export const resourceUrl = (baseUrl: string): string => `${baseUrl}/mcp`

export const metadataUrl = (baseUrl: string): string => resourceMetadataUrl(baseUrl, "mcp")!

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
  scopes_supported: accessScopes,
  // Only the Authorization header: tokens in URLs or bodies end up in logs and caches.
  bearer_methods_supported: ["header"],
  resource_name: "Cairn MCP endpoint"
})

/**
 * What the MCP endpoint needs beyond the server settings: the authorization servers it
 * advertises to clients (the issuers identity trusts) and the request body limit.
 */
import { externalIssuer, FallbackIssuer } from "@cairn/server/auth/FallbackIssuer"
import { limitsConfig } from "@cairn/server/http/Limits"
import { Context, Effect, Layer, Option } from "effect"

export interface McpConfigShape {
  /** Issuer URLs published as `authorization_servers` in the resource metadata. */
  readonly authorizationServers: ReadonlyArray<string>
  /** Largest accepted JSON-RPC request body, in bytes. */
  readonly maxBodyBytes: number
}

export class McpConfig extends Context.Tag("@cairn/mcp/McpConfig")<McpConfig, McpConfigShape>() {
  static readonly layer = (config: McpConfigShape) => Layer.succeed(McpConfig, config)

  /**
   * `CAIRN_ISSUER` when the operator configured an external issuer, otherwise the
   * deployment's `FallbackIssuer` (in development, `CAIRN_DEV_ISSUER_URL`).
   * `CAIRN_MAX_BODY_BYTES` (default 1 MiB) is the same limit the `/db` front applies.
   */
  static readonly layerConfig = Layer.effect(
    McpConfig,
    Effect.gen(function* () {
      const external = yield* externalIssuer
      // The same rule identity uses to decide which issuer it trusts.
      const issuer = Option.isSome(external) ? external.value : yield* Effect.flatMap(FallbackIssuer, (f) => f.url)
      const limits = yield* limitsConfig
      return { authorizationServers: [issuer], maxBodyBytes: limits.maxBodyBytes }
    })
  )
}

/**
 * Which MCP protocol versions the deployment accepts (`CAIRN_MCP_PROTOCOL_VERSIONS`, default:
 * every version the SDK implements). Checked at startup against the SDK; at run time a request
 * whose `mcp-protocol-version` header, or an `initialize` whose requested version, is outside
 * the list is refused with a JSON-RPC error naming the accepted versions.
 */
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js"
import { OperatorSettings } from "@cairn/server/operations/OperatorSettings"
import { Effect, Option } from "effect"

/** The accepted versions, or a startup failure naming the ones the SDK does not implement. */
export const acceptedVersions: Effect.Effect<ReadonlyArray<string>, Error> = Effect.flatMap(Effect.serviceOption(OperatorSettings), (settings) => {
  const chosen = Option.flatMap(settings, (s) => s.mcpProtocolVersions)
  if (Option.isNone(chosen)) return Effect.succeed(SUPPORTED_PROTOCOL_VERSIONS)
  const unknown = chosen.value.filter((v) => !SUPPORTED_PROTOCOL_VERSIONS.includes(v))
  return unknown.length === 0
    ? Effect.succeed(chosen.value)
    : Effect.fail(
        new Error(`CAIRN_MCP_PROTOCOL_VERSIONS: ${unknown.join(", ")} ${unknown.length === 1 ? "is not a version" : "are not versions"} this server implements (${SUPPORTED_PROTOCOL_VERSIONS.join(", ")})`)
      )
})

const requestedByInitialize = (message: unknown): string | undefined => {
  if (typeof message !== "object" || message === null || Array.isArray(message)) return undefined
  const { method, params } = message as { method?: unknown; params?: { protocolVersion?: unknown } }
  return method === "initialize" && typeof params?.protocolVersion === "string" ? params.protocolVersion : undefined
}

/** Why this request's protocol version is refused, or `undefined` when it is accepted. */
export const protocolProblem = (header: string | undefined, message: unknown, accepted: ReadonlyArray<string>): string | undefined => {
  const asked = header ?? requestedByInitialize(message)
  if (asked === undefined || accepted.includes(asked)) return undefined
  return `Unsupported protocol version ${JSON.stringify(asked.slice(0, 32))}: this deployment accepts ${accepted.join(", ")}.`
}

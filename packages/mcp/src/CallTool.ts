/**
 * One `tools/call`: the arguments go to the engine as given (it decodes them, like every
 * transport's payload), and its answer becomes an MCP tool result. Public errors are
 * tool results (`isError`); the engine's other refusals fail, for the endpoint to answer
 * in MCP's protocol or HTTP layer.
 */
import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"
import { type DataPlaneShape } from "@cairn/server/DataPlane"
import { CurrentTransport } from "@cairn/server/EngineMetrics"
import { type EngineError, isRefusal, type Refusal, scrubDefects } from "@cairn/server/Refusal"
import type { Principal } from "@cairn/domain/Principal"
import { Effect } from "effect"
import type { ToolName } from "./McpTools.js"

/** The results `success` made: their text content is the JSON of their structured content. */
const successes = new WeakSet<CallToolResult>()

/** A successful tool result: the structured value plus the same value as compact text. */
export const success = (value: object): CallToolResult => {
  const result: CallToolResult = {
    content: [{ type: "text", text: JSON.stringify(value) }],
    structuredContent: value as Record<string, unknown>
  }
  successes.add(result)
  return result
}

const sameKeys = (value: object, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(value)
  return own.length === keys.length && own.every((key, i) => key === keys[i])
}

/**
 * The JSON text of `message`, the SDK's response carrying `sent` (a result made by
 * `success`, whose text content is the JSON of its structured content): the structured
 * content is written as that text rather than serialized a second time. The SDK sends a
 * validated copy of `sent`; only when the copy is exactly `sent`'s shape (same keys in
 * the same order, the same text, a structured content with the same own keys and values)
 * is the text reused, so the result is `JSON.stringify(message)` either way.
 */
export const responseText = (message: JSONRPCMessage, sent: CallToolResult | undefined): string => {
  const fallback = () => JSON.stringify(message)
  if (sent === undefined || !successes.has(sent) || !sameKeys(message, ["result", "jsonrpc", "id"]) || message.jsonrpc !== "2.0") return fallback()
  const { id, result } = message as unknown as { readonly id: unknown; readonly result: Record<string, unknown> }
  const value = sent.structuredContent!
  const text = (sent.content[0] as { readonly text: string }).text
  const copy = result.structuredContent as Record<string, unknown>
  const content = result.content
  const echoed: unknown = Array.isArray(content) && content.length === 1 ? content[0] : undefined
  const keys = Object.keys(value)
  if (
    !sameKeys(result, ["content", "structuredContent"]) ||
    typeof echoed !== "object" ||
    echoed === null ||
    !sameKeys(echoed, ["type", "text"]) ||
    (echoed as { readonly type: unknown }).type !== "text" ||
    (echoed as { readonly text: unknown }).text !== text ||
    (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) ||
    typeof copy !== "object" ||
    copy === null ||
    !sameKeys(copy, keys) ||
    !keys.every((key) => copy[key] === value[key])
  ) {
    return fallback()
  }
  return `{"result":{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`
}

/** A public error as a tool result the agent can read and recover from. */
export const failure = (error: PublicError): CallToolResult => {
  const body = toPublicBody(error)
  return {
    content: [{ type: "text", text: `${body.code}: ${body.message} Recovery: ${body.recovery}` }],
    structuredContent: body as unknown as Record<string, unknown>,
    isError: true
  }
}

/** Runs one tool for `principal`; fails only with a refusal (every public error is already a tool result). */
export const callTool = (
  plane: DataPlaneShape,
  principal: Principal,
  name: ToolName,
  args: unknown
): Effect.Effect<CallToolResult, Refusal> => {
  // MCP lets a client omit `arguments`; that is an empty object.
  const payload = args ?? {}
  const run: Effect.Effect<object, EngineError> =
    name === "describe" ? plane.describe(principal, payload) : name === "query" ? plane.query(principal, payload) : plane.mutate(principal, payload)
  return run.pipe(
    Effect.provideService(CurrentTransport, "mcp"),
    scrubDefects(`MCP ${name}`),
    Effect.map(success),
    Effect.catchAll((error) => (isRefusal(error) ? Effect.fail(error) : Effect.succeed(failure(error))))
  )
}

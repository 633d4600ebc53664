/**
 * The wire text of a `tools/call` answer: MCP's JSON-RPC response (the SDK's
 * `CallToolResultSchema` inside `{result, jsonrpc, id}`, or `{jsonrpc, id, error}`) exactly
 * as the SDK server writes it, built without its protocol loop (see `DirectToolCall`).
 * Property-tested against the SDK's own encoding.
 */
import { safeParse } from "@modelcontextprotocol/sdk/server/zod-compat.js"
import { type CallToolResult, CallToolResultSchema, ErrorCode, McpError, type RequestId } from "@modelcontextprotocol/sdk/types.js"
import { isSuccess } from "./CallTool.js"

/**
 * A JSON-RPC error the SDK sends as is (its own `McpError` prefixes the message with
 * "MCP error <code>:", which only repeats the code to an agent).
 */
export class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown
  ) {
    super(message)
  }
}

/**
 * A top-level object whose copy by the SDK's `structuredContent` record schema serializes
 * exactly as it does: plain, with only enumerable string keys (the record copies
 * non-enumerable ones and refuses symbols), no own `__proto__` (skipped by the copy) and no
 * `toJSON` (it would be called on the copy).
 */
const copiesAsIs = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return false
  const names = Reflect.ownKeys(value)
  return names.length === Object.keys(value).length && !names.includes("__proto__") && !names.includes("toJSON")
}

/** The SDK's error response to a handler that threw `error`. */
const errorText = (id: RequestId, error: ProtocolError | McpError): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    id,
    error: {
      code: Number.isSafeInteger(error.code) ? error.code : ErrorCode.InternalError,
      message: error.message ?? "Internal error",
      ...(error.data !== undefined && { data: error.data })
    }
  })

/**
 * The SDK's response text to request `id` answered with `answer`: a thrown protocol error, or
 * a result as its validation outputs it. A result `success` made (its text content the JSON
 * of its structured content) is written with that text as the structured content rather
 * than serialized a second time; it passes the validation unchanged (a text item and a
 * plain record of JSON values), so this is the JSON of what the SDK would send.
 */
export const answerText = (id: RequestId, answer: CallToolResult | ProtocolError): string => {
  if (answer instanceof ProtocolError) return errorText(id, answer)
  const value = answer.structuredContent
  if (isSuccess(answer) && value !== undefined && copiesAsIs(value)) {
    const text = (answer.content[0] as { readonly text: string }).text
    return `{"result":{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`
  }
  const checked = safeParse(CallToolResultSchema, answer)
  if (!checked.success) {
    const message = checked.error instanceof Error ? checked.error.message : String(checked.error)
    return errorText(id, new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${message}`))
  }
  return JSON.stringify({ result: checked.data, jsonrpc: "2.0", id })
}

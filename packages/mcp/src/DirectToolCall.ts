/**
 * A `tools/call` answered on the HTTP request's own fiber, with the SDK's own schemas and
 * the JSON its server would send, but without its protocol loop: the common MCP request
 * (one of the three tools, valid params, no task) costs no pooled server, no promise chain
 * of the protocol, no second fiber for the engine and no re-validation of the request and
 * the result. What the SDK server does with such a request, in its order: its request entry
 * checks task augmentation (none here), its handler wrapper parses the request with
 * `CallToolRequestSchema` (a failure is its error to answer), `Server`'s tools/call wrapper
 * parses it again (the same schema: it passes) and validates the handler's result with
 * `CallToolResultSchema`, and the response is `{result, jsonrpc, id}` or, for a thrown
 * error, `{jsonrpc, id, error: {code, message, data?}}` (written by `ToolCallAnswer`).
 * Anything else (another method, an unknown tool, params the schema refuses, a task) stays
 * with the SDK server.
 */
import { safeParse } from "@modelcontextprotocol/sdk/server/zod-compat.js"
import { type CallToolRequest, CallToolRequestSchema, type JSONRPCRequest, type RequestId } from "@modelcontextprotocol/sdk/types.js"
import { isToolName, type ToolName } from "./McpTools.js"

/** A checked call of one of the three tools. */
export interface ToolCall {
  readonly name: ToolName
  readonly arguments: CallToolRequest["params"]["arguments"]
}

/**
 * The call a pooled SDK server would hand to its tools/call handler as is (its arguments as
 * the request schema outputs them), or `undefined` when the server would answer anything
 * but the handler's outcome: another method, params its schema refuses, a task-augmented
 * call (refused for want of the capability), a tool this server does not have.
 */
export const directToolCall = (request: JSONRPCRequest): IdentifiedToolCall | undefined => {
  if (request.method !== "tools/call") return undefined
  const parsed = safeParse(CallToolRequestSchema, request)
  if (!parsed.success) return undefined
  const params = parsed.data.params
  if (params.task !== undefined || !isToolName(params.name)) return undefined
  return { id: request.id, name: params.name, arguments: params.arguments }
}

/** A call of one of the tools, with its request id. */
export interface IdentifiedToolCall extends ToolCall {
  readonly id: RequestId
}

const isPlainObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && Object.getPrototypeOf(u) === Object.prototype

/** Whether `value`'s own enumerable keys are exactly `keys` (in any order). */
const hasExactly = (value: object, keys: ReadonlyArray<string>): boolean =>
  Object.keys(value).length === keys.length && keys.every((key) => Object.prototype.propertyIsEnumerable.call(value, key))

/**
 * The common call in its plainest form, recognized without the two zod parses
 * (`directRequest`'s message schema, then `directToolCall`'s): exactly `{jsonrpc: "2.0", id,
 * method: "tools/call", params: {name, arguments?}}`, plain objects as `JSON.parse` makes
 * them, an id the schema takes (a string or a safe integer), one of the tools' names, and
 * arguments without an own `__proto__` (the schema's record copy would drop it; otherwise the
 * copy has the same keys and values, so the arguments are handed over as they are). Whatever
 * this does not recognize may still be a direct call: the schemas decide (property-tested
 * against them). The headers are checked apart (`directHeaders`).
 */
export const plainToolCall = (message: unknown): IdentifiedToolCall | undefined => {
  if (!isPlainObject(message) || !hasExactly(message, ["jsonrpc", "id", "method", "params"])) return undefined
  const { id, jsonrpc, method, params } = message
  if (jsonrpc !== "2.0" || method !== "tools/call" || !(typeof id === "string" || Number.isSafeInteger(id))) return undefined
  if (!isPlainObject(params)) return undefined
  const { arguments: args, name } = params
  if (typeof name !== "string" || !isToolName(name)) return undefined
  if (args === undefined) return hasExactly(params, ["name"]) ? { id: id as RequestId, name, arguments: undefined } : undefined
  if (!hasExactly(params, ["name", "arguments"]) || !isPlainObject(args) || Object.hasOwn(args, "__proto__")) return undefined
  return { id: id as RequestId, name, arguments: args }
}

/**
 * A request to a method this endpoint serves whose `params` do not have the method's shape is
 * the caller's mistake: `-32602` with one sentence. Left to the SDK, the handler's schema
 * check throws and the SDK answers `-32603` with the validator's dump.
 */
import { InitializeRequestSchema, ListToolsRequestSchema, PingRequestSchema } from "@modelcontextprotocol/sdk/types.js"

/** The methods whose params the SDK checks in its handler, each with the shape a caller reads. */
const checked: Record<string, { readonly schema: typeof PingRequestSchema | typeof ListToolsRequestSchema | typeof InitializeRequestSchema; readonly shape: string }> = {
  initialize: { schema: InitializeRequestSchema, shape: "{protocolVersion: string, capabilities: object, clientInfo: {name: string, version: string}}" },
  "tools/list": { schema: ListToolsRequestSchema, shape: "{cursor?: string} or nothing" },
  ping: { schema: PingRequestSchema, shape: "nothing" }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A path as a caller wrote it (`params.clientInfo.name`), its segments bounded (they may be the caller's keys). */
const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((segment) => (typeof segment === "number" ? `[${segment}]` : `.${String(segment).slice(0, 32)}`)).join("").replace(/^\./, "")

/** Why a `tools/call`'s params cannot be a call (its arguments are the engine's to decode). */
const toolCallProblem = (params: unknown): string | undefined =>
  !isObject(params)
    ? "params must be an object: {name, arguments}."
    : typeof params["name"] !== "string"
      ? "params.name must be a string naming the tool: describe, query or mutate."
      : params["arguments"] !== undefined && !isObject(params["arguments"])
        ? "arguments must be an object holding the tool's input."
        : params["_meta"] !== undefined && !isObject(params["_meta"])
          ? "params._meta must be an object when given."
          : undefined

/** What is wrong with one JSON-RPC request's params, for a method served here; `undefined` when nothing is (or it is not a request). */
export const invalidParams = (message: unknown): { readonly id: string | number | null; readonly message: string } | undefined => {
  if (!isObject(message) || typeof message["method"] !== "string" || !("id" in message)) return undefined
  const id = typeof message["id"] === "string" || typeof message["id"] === "number" ? message["id"] : null
  const method = message["method"]
  if (method === "tools/call") {
    const problem = toolCallProblem(message["params"])
    return problem === undefined ? undefined : { id, message: `Invalid params: ${problem}` }
  }
  const check = Object.hasOwn(checked, method) ? checked[method] : undefined
  if (check === undefined) return undefined
  const parsed = check.schema.safeParse(message)
  if (parsed.success) return undefined
  const issue = parsed.error.issues[0]
  const where = issue === undefined || issue.path.length === 0 ? "params" : pathText(issue.path)
  const expected = issue !== undefined && issue.code === "invalid_type" ? ` must be ${/^[aeiou]/.test(String(issue.expected)) ? "an" : "a"} ${String(issue.expected)}` : " is not valid"
  return { id, message: `Invalid params: ${where}${expected}; ${method} takes params ${check.shape}.` }
}

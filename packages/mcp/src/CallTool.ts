/**
 * One `tools/call`: the arguments go to the engine as given (it decodes them, like every
 * transport's payload), and its answer becomes an MCP tool result. Public errors are
 * tool results (`isError`); the engine's other refusals fail, for the endpoint to answer
 * in MCP's protocol or HTTP layer.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"
import { type DataPlaneShape } from "@cairn/server/engine/DataPlane"
import { CurrentTransport } from "@cairn/server/engine/EngineMetrics"
import { type EngineError, isRefusal, type Refusal, scrubDefects } from "@cairn/server/engine/Refusal"
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

/** Whether `success` made `result` (so its text content is the JSON of its structured content). */
export const isSuccess = (result: CallToolResult): boolean => successes.has(result)

/**
 * A public error as a tool result the agent can read and recover from. A rejected intent
 * carries its durable receipt (as on RPC): every decided intent has one, and a replay
 * returns the same.
 */
export const failure = (error: PublicError): CallToolResult => {
  const receipt = error._tag === "OperationRejected" ? error.receipt : undefined
  const body = receipt === undefined ? toPublicBody(error) : { ...toPublicBody(error), receipt }
  const text = `${body.code}: ${body.message} Recovery: ${body.recovery}`
  return {
    content: [{ type: "text", text: receipt === undefined ? text : `${text} Receipt: ${JSON.stringify(receipt)}` }],
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
    name === "describe" ? plane.describe(principal, payload) : name === "query" ? plane.query(principal, payload, { fileLinks: "signed" }) : plane.mutate(principal, payload)
  return run.pipe(
    Effect.provideService(CurrentTransport, "mcp"),
    scrubDefects(`MCP ${name}`),
    Effect.map(success),
    Effect.catchAll((error) => (isRefusal(error) ? Effect.fail(error) : Effect.succeed(failure(error))))
  )
}

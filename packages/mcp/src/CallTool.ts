/**
 * One `tools/call`: decode the arguments with the domain's request schemas, run the
 * engine as the verified principal, and shape the answer as an MCP tool result. Public
 * errors become tool results (`isError`); overload stays a protocol-level failure.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import {
  decodeDescribeRequest,
  decodeMutateRequest,
  isPublicError,
  type Overloaded,
  type Principal,
  type PublicError,
  toPublicBody
} from "@cairn/domain"
import { decodeQueryRequest, type QueryLimits } from "@cairn/query"
import type { DataPlaneShape } from "@cairn/server"
import { Effect } from "effect"
import type { ToolName } from "./McpTools.js"

/** A successful tool result: the structured value plus the same value as compact text. */
export const success = (value: object): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value) }],
  structuredContent: value as Record<string, unknown>
})

/** A public error as a tool result the agent can read and recover from. */
export const failure = (error: PublicError): CallToolResult => {
  const body = toPublicBody(error)
  return {
    content: [{ type: "text", text: `${body.code}: ${body.message} Recovery: ${body.recovery}` }],
    structuredContent: body as unknown as Record<string, unknown>,
    isError: true
  }
}

/**
 * Runs one tool for `principal`. Fails only with `Overloaded` (the transport answers it
 * as a protocol error); every public error is already a tool result.
 */
export const callTool = Effect.fn("Mcp.callTool")(function* (
  plane: DataPlaneShape,
  principal: Principal,
  name: ToolName,
  args: unknown
) {
  const run: Effect.Effect<object, PublicError | Overloaded, QueryLimits> =
    name === "describe"
      ? Effect.flatMap(decodeDescribeRequest(args ?? {}), (request) => plane.describe(principal, request))
      : name === "query"
        ? // The query package's decoder: precise issues inside filters, and their size bounded first.
          Effect.flatMap(decodeQueryRequest(args ?? {}), (request) => plane.query(principal, request))
        : Effect.flatMap(decodeMutateRequest(args ?? {}), (request) => plane.mutate(principal, request))
  return yield* run.pipe(
    Effect.map(success),
    Effect.catchIf(isPublicError, (error) => Effect.succeed(failure(error)))
  )
})

/**
 * One `tools/call`: decode the arguments with the domain's request schemas, run the
 * engine as the verified principal, and shape the answer as an MCP tool result. Public
 * errors become tool results (`isError`); overload stays a protocol-level failure.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import {
  decodeStrict,
  DescribeRequest,
  InvalidInput,
  InvalidQuery,
  type Issue,
  isPublicError,
  MutateRequest,
  type Overloaded,
  type Principal,
  type PublicError,
  toPublicBody
} from "@cairn/domain"
import { decodeQueryRequest } from "@cairn/query"
import type { DataPlaneShape } from "@cairn/server"
import { Effect } from "effect"
import type { ToolName } from "./McpTools.js"

const describeIssues = (issues: ReadonlyArray<Issue>): string =>
  issues
    .slice(0, 5)
    .map((i) => `${i.path}: ${i.message}`)
    .join("; ") + (issues.length > 5 ? `; and ${issues.length - 5} more` : "")

const decodeDescribe = decodeStrict(
  DescribeRequest,
  (issues) =>
    new InvalidQuery({
      message: `The describe arguments do not match the tool's input schema: ${describeIssues(issues)}.`,
      issues
    })
)

const decodeMutate = decodeStrict(
  MutateRequest,
  (issues) =>
    new InvalidInput({
      message: `The mutate arguments do not match the tool's input schema: ${describeIssues(issues)}.`,
      issues
    })
)

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
  const run: Effect.Effect<object, PublicError | Overloaded> =
    name === "describe"
      ? Effect.flatMap(decodeDescribe(args ?? {}), (request) => plane.describe(principal, request))
      : name === "query"
        ? // The query package's decoder: precise issues inside filters, and their size bounded first.
          Effect.flatMap(decodeQueryRequest(args ?? {}), (request) => plane.query(principal, request))
        : Effect.flatMap(decodeMutate(args ?? {}), (request) => plane.mutate(principal, request))
  return yield* run.pipe(
    Effect.map(success),
    Effect.catchIf(isPublicError, (error) => Effect.succeed(failure(error)))
  )
})

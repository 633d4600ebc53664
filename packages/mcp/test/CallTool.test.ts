// A tool call's response text: a successful result's text content is reused for its
// structured content, and the response is exactly what `JSON.stringify` writes, whether or
// not the reuse applies.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, type CallToolResult, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { failure, responseText, success } from "@cairn/mcp/CallTool"
import { DirectTransport, directRequest } from "@cairn/mcp/DirectTransport"
import { InvalidQuery } from "@cairn/domain/PublicError"

const headers = { accept: "application/json, text/event-stream", "content-type": "application/json" }

/** The SDK's response to a tools/call answered with `result`, as a pooled server sends it. */
const answered = async (result: CallToolResult, id: string | number) => {
  const server = new Server({ name: "t", version: "1" }, { capabilities: { tools: {} } })
  server.setRequestHandler(CallToolRequestSchema, () => result)
  const transport = new DirectTransport()
  await transport.connectTo(server)
  const message = await transport.exchange(directRequest(headers, { jsonrpc: "2.0", id, method: "tools/call", params: { name: "query", arguments: {} } })!, {})
  await server.close()
  return message
}

describe("responseText", () => {
  it.effect("writes the SDK's response to a successful result exactly as JSON.stringify, serializing the value once", () =>
    Effect.promise(async () => {
      let serialized = 0
      // Counts how often the value is serialized (the SDK's validated copy keeps the same values).
      const counted = { toJSON: () => (serialized++, { n: 1 }) }
      const values = [
        { rows: [{ id: "a", title: 'quote " backslash \\ newline \n unicode é \u2028' }], cursor: null, counted },
        { items: [], pageInfo: { hasNextPage: false } },
        {}
      ]
      for (const [i, value] of values.entries()) {
        for (const id of [7, "x-1"]) {
          serialized = 0
          const sent = success(value)
          const message = await answered(sent, id)
          const text = responseText(message, sent)
          if (i === 0) assert.strictEqual(serialized, 1, "the value is serialized once, for the text content")
          assert.strictEqual(text, JSON.stringify(message))
        }
      }
    })
  )

  it.effect("serializes the message when the response is not exactly the result it was given", () =>
    Effect.promise(async () => {
      const sent = success({ rows: [1, 2] })
      const message = (await answered(sent, 1)) as JSONRPCMessage & { result: CallToolResult }
      const altered: Array<JSONRPCMessage> = [
        { ...message, result: { ...message.result, structuredContent: { rows: [1, 2, 3] } } },
        { ...message, result: { ...message.result, structuredContent: { rows: sent.structuredContent!["rows"], extra: 1 } } },
        { ...message, result: { ...message.result, content: [{ type: "text", text: "other" }] } },
        { ...message, result: { ...message.result, isError: true } },
        { jsonrpc: "2.0", id: 1, error: { code: -32603, message: "boom" } }
      ]
      for (const m of altered) assert.strictEqual(responseText(m, sent), JSON.stringify(m))
      // A result `success` did not make (an error result: its text is not the JSON of its structured content).
      const refused = failure(new InvalidQuery({ message: "bad", issues: [] }))
      const answer = await answered(refused, 2)
      assert.strictEqual(responseText(answer, refused), JSON.stringify(answer))
      assert.strictEqual(responseText(answer, undefined), JSON.stringify(answer))
    })
  )
})

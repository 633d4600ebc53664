// A tool call answered on the request's fiber against the SDK server it stands in for:
// which requests it takes (exactly those the server would hand to its tools/call handler,
// with the same arguments), and that every outcome (a result `success` made, a public
// error result, a thrown protocol error, a result the SDK refuses) is answered with exactly
// the body the server sends; a successful result's value is serialized once.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, type CallToolResult, ErrorCode, RELATED_TASK_META_KEY } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { failure, success } from "@cairn/mcp/CallTool"
import { answerText, directToolCall, ProtocolError } from "@cairn/mcp/DirectToolCall"
import { DirectTransport, directRequest } from "@cairn/mcp/DirectTransport"
import { InvalidQuery } from "@cairn/domain/PublicError"

const headers = { accept: "application/json, text/event-stream", "content-type": "application/json" }
const call = (params: unknown, id: string | number = 7) => ({ jsonrpc: "2.0", id, method: "tools/call", params })

/** A pooled SDK server's response text to `message`, its handler answering with `answer`; and what the handler saw. */
const viaSdk = async (message: unknown, answer: CallToolResult | ProtocolError) => {
  const seen: Array<unknown> = []
  const server = new Server({ name: "t", version: "1" }, { capabilities: { tools: {} } })
  server.setRequestHandler(CallToolRequestSchema, (request) => {
    seen.push({ name: request.params.name, arguments: request.params.arguments })
    if (answer instanceof ProtocolError) throw answer
    return answer
  })
  const transport = new DirectTransport()
  await transport.connectTo(server)
  const response = await transport.exchange(directRequest(headers, message)!, {})
  await server.close()
  return { text: JSON.stringify(response), seen }
}

const plain = { rows: [{ id: "a", title: 'quote " backslash \\ newline \n unicode é \u2028' }], cursor: null }

describe("directToolCall", () => {
  it.effect("takes exactly the calls the SDK server hands to its handler, with the arguments it hands over", () =>
    Effect.promise(async () => {
      const messages = [
        call({ name: "query", arguments: { query: { version: 1 }, n: [1, { a: null }] } }),
        call({ name: "describe" }, "x-1"),
        call({ name: "mutate", arguments: {}, _meta: { progressToken: 3 } }),
        call({ name: "query", arguments: {}, _meta: { [RELATED_TASK_META_KEY]: { taskId: "t" } } }),
        call({ name: "query", extra: true, arguments: {} }),
        // The SDK refuses these before the handler, or the handler refuses them (an unknown tool).
        call({ name: "query", arguments: {}, task: { ttl: 1000 } }),
        call({ name: 3, arguments: {} }),
        call({ arguments: {} }),
        call({ name: "query", arguments: { [Symbol.iterator]: 1 } }),
        call({ name: "nope", arguments: {} }),
        { jsonrpc: "2.0", id: 8, method: "tools/list", params: {} },
        { jsonrpc: "2.0", id: 9, method: "ping" }
      ]
      const taken: Array<unknown> = []
      for (const message of messages) {
        const request = directRequest(headers, message)
        if (request === undefined) continue
        const direct = directToolCall(request)
        const sdk = await viaSdk(message, success({}))
        if (direct === undefined) {
          // Not handed to a tool: the server answers without the handler, or the handler refuses an unknown name.
          assert.isTrue(sdk.seen.length === 0 || (sdk.seen[0] as { name: unknown }).name === "nope", JSON.stringify(message))
        } else {
          assert.deepStrictEqual(sdk.seen, [direct], JSON.stringify(message))
          taken.push(message.id)
        }
      }
      assert.deepStrictEqual(taken, [7, "x-1", 7, 7, 7])
    })
  )
})

describe("answerText", () => {
  it.effect("writes every outcome exactly as the SDK server sends it", () =>
    Effect.promise(async () => {
      const nullProto = Object.assign(Object.create(null) as object, { a: 1 })
      const hidden = Object.defineProperty({ shown: 1 }, "hidden", { value: 2, enumerable: false })
      const withToJson = { toJSON: () => ({ other: true }), n: 1 }
      class Page {
        constructor(readonly rows: Array<number>) {}
      }
      const answers: Array<CallToolResult | ProtocolError> = [
        success(plain),
        success({ items: [], pageInfo: { hasNextPage: false } }),
        success({}),
        success(nullProto),
        success(hidden),
        success(withToJson),
        success(new Page([1])),
        success(JSON.parse('{"__proto__": {"x": 1}, "y": 2}') as object),
        failure(new InvalidQuery({ message: "bad", issues: [] })),
        { content: "not a list" } as never,
        { content: [{ type: "text", text: "made elsewhere" }], structuredContent: { a: 1 } },
        new ProtocolError(ErrorCode.InternalError, "boom"),
        new ProtocolError(-32005, "Overloaded. Retry.", { retryAfterSeconds: 1 })
      ]
      for (const answer of answers) {
        for (const id of [7, "x-1"]) {
          const message = call({ name: "query", arguments: {} }, id)
          const sdk = await viaSdk(message, answer)
          assert.strictEqual(answerText(id, answer), sdk.text, sdk.text)
        }
      }
    })
  )

  it("serializes a successful result's value once", () => {
    let serialized = 0
    // Counts how often the value is serialized.
    const counted = { toJSON: () => (serialized++, { n: 1 }) }
    const text = answerText(1, success({ ...plain, counted }))
    assert.strictEqual(serialized, 1)
    assert.deepStrictEqual(JSON.parse(text).result.structuredContent, { ...plain, counted: { n: 1 } })
  })
})

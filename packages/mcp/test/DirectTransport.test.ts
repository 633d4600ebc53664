// The direct transport against the SDK's own: which requests it takes (only those the SDK's
// stateless JSON-response transport hands straight to its server), and that for each of
// them a server answers it with exactly the body the SDK's transport would send.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { DirectTransport, directRequest } from "@cairn/mcp/DirectTransport"

const headers = {
  accept: "application/json, text/event-stream",
  "content-type": "application/json",
  "mcp-protocol-version": "2025-06-18"
}
const call = (name: string, args: unknown = {}, id: string | number = 7) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args }
})

/** A server whose handlers answer, fail and observe in every way a response can take. */
const makeServer = (seen: Array<unknown>) => {
  const server = new Server({ name: "t", version: "1" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: "echo", inputSchema: { type: "object" } }] }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    seen.push({ clientId: extra.authInfo?.clientId, auth: extra.requestInfo?.headers["authorization"] })
    // A notification on the way is not part of a JSON answer.
    await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: "working" } })
    switch (request.params.name) {
      case "echo":
        return { content: [{ type: "text", text: JSON.stringify(request.params.arguments) }], structuredContent: request.params.arguments }
      case "protocol":
        throw new McpError(ErrorCode.InvalidParams, "bad params", { hint: 1 })
      case "crash":
        throw new Error("boom")
      default:
        // Not a valid tool result: the SDK's own result validation answers.
        return { content: "not a list" } as never
    }
  })
  return server
}

const viaSdk = async (message: unknown) => {
  const server = makeServer([])
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
  await server.connect(transport)
  const answer = await transport.handleRequest(new Request("http://127.0.0.1/mcp", { method: "POST", headers }), {
    parsedBody: message,
    authInfo: { token: "", clientId: "alice", scopes: [] }
  })
  const text = await answer.text()
  await transport.close()
  return { status: answer.status, contentType: answer.headers.get("content-type"), text }
}

describe("directRequest", () => {
  it("takes one JSON-RPC request, as the SDK's schema outputs it", () => {
    const message = call("query", { query: { version: 1 } })
    assert.deepStrictEqual(directRequest(headers, message), message as unknown)
    assert.deepStrictEqual(directRequest({ ...headers, "mcp-protocol-version": undefined }, { jsonrpc: "2.0", id: "a", method: "ping" }), {
      jsonrpc: "2.0",
      id: "a",
      method: "ping"
    })
    assert.isDefined(directRequest({ ...headers, "content-type": "application/json; charset=utf-8" }, message))
  })

  it("leaves to the SDK what it answers itself, negotiates, or collects", () => {
    const message = call("query")
    const refused: Array<[Record<string, string | undefined>, unknown]> = [
      [{ ...headers, accept: "application/json" }, message],
      [{ ...headers, accept: undefined }, message],
      [{ ...headers, "content-type": "text/plain" }, message],
      [{ ...headers, "mcp-protocol-version": "1999-01-01" }, message],
      [headers, { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "c", version: "1" } } }],
      [headers, { jsonrpc: "2.0", method: "notifications/initialized" }],
      [headers, { jsonrpc: "2.0", id: 1, result: {} }],
      [headers, [message]],
      [headers, { ...message, extra: true }],
      [headers, { ...message, jsonrpc: "1.0" }],
      [headers, { ...message, id: 1.5 }],
      [headers, { ...message, id: null }],
      [headers, { ...message, params: "x" }],
      [headers, "text"]
    ]
    for (const [h, m] of refused) assert.isUndefined(directRequest(h, m), JSON.stringify([h, m]))
  })
})

describe("DirectTransport", () => {
  // `connectTo` hands requests to the protocol's request entry (the pinned SDK has one: if an
  // upgrade drops it, this fails rather than silently falling back); a plain `connect`
  // takes them through the protocol's `onmessage`. Both answer alike.
  for (const viaEntry of [true, false]) {
    it.effect(`answers every kind of request exactly as the SDK's JSON-response transport, reused across requests (${viaEntry ? "request entry" : "onmessage"})`, () =>
    Effect.promise(async () => {
      const seen: Array<unknown> = []
      const server = makeServer(seen)
      const transport = new DirectTransport()
      if (viaEntry) await transport.connectTo(server)
      else await server.connect(transport)
      assert.strictEqual(transport.direct, viaEntry)
      const messages = [
        call("echo", { rows: [{ id: "a", n: 1 }], cursor: null }),
        call("echo", { different: "caller" }, "x-1"),
        call("protocol"),
        call("crash"),
        call("invalid-result"),
        { jsonrpc: "2.0", id: 8, method: "tools/list", params: {} },
        { jsonrpc: "2.0", id: 9, method: "ping" },
        { jsonrpc: "2.0", id: 10, method: "no/such/method", params: {} },
        { jsonrpc: "2.0", id: 11, method: "tools/call", params: { arguments: {} } }
      ]
      for (const message of messages) {
        const sdk = await viaSdk(message)
        assert.strictEqual(sdk.status, 200)
        assert.strictEqual(sdk.contentType, "application/json")
        const direct = await transport.exchange(directRequest(headers, message)!, {
          authInfo: { token: "", clientId: "alice", scopes: [] },
          requestInfo: { headers: { ...headers, authorization: "Bearer t" } }
        })
        assert.strictEqual(JSON.stringify(direct), sdk.text, JSON.stringify(message))
      }
      // The caller and the request's headers reach the handler.
      assert.deepStrictEqual(seen[0], { clientId: "alice", auth: "Bearer t" })
      // Still connected: nothing closed the server's transport.
      assert.strictEqual(server.transport, transport)
      // Closing the server closes the transport: it carries nothing after.
      await server.close()
      assert.strictEqual(transport.direct, false)
      const after = await transport.exchange(directRequest(headers, call("echo"))!, {}).then(() => "answered", (e: Error) => e.message)
      assert.include(after, "not connected")
    })
  )
  }

  it.effect("carries one request at a time and refuses a second while one is pending", () =>
    Effect.promise(async () => {
      const server = new Server({ name: "t", version: "1" }, { capabilities: { tools: {} } })
      let release: () => void = () => {}
      server.setRequestHandler(CallToolRequestSchema, () => new Promise((resolve) => (release = () => resolve({ content: [] }))))
      const transport = new DirectTransport()
      await server.connect(transport)
      const first = transport.exchange(directRequest(headers, call("slow"))!, {})
      const second = await transport.exchange(directRequest(headers, call("slow", {}, 8))!, {}).then(
        () => "answered",
        (e: Error) => e.message
      )
      assert.include(second, "already carrying a request")
      await new Promise((r) => setTimeout(r, 0))
      release()
      assert.deepStrictEqual(await first, { result: { content: [] }, jsonrpc: "2.0", id: 7 })
    })
  )
})

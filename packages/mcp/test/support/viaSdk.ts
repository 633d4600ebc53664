// A pooled SDK server answering one message: the oracle the direct tool-call path is held to.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { DirectTransport, directRequest } from "@cairn/mcp/DirectTransport"
import { ProtocolError } from "@cairn/mcp/ToolCallAnswer"

export const headers = { accept: "application/json, text/event-stream", "content-type": "application/json" }

/** A pooled SDK server's response text to `message`, its handler answering with `answer`; and what the handler saw. */
export const viaSdk = async (message: unknown, answer: CallToolResult | ProtocolError) => {
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


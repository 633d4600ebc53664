/**
 * A reusable in-process SDK `Transport` for the common MCP request: one JSON-RPC request
 * (not `initialize`) that the SDK's web-standard transport would hand straight to the
 * server and answer, in JSON-response mode, with the server's response as the whole body.
 * A server stays connected to one of these for its lifetime, so such a request costs no
 * transport, no web `Request`/`Response`, no connect and close per call; every other
 * request (initialize, notifications, batches, anything the SDK's transport answers
 * itself) still goes through `WebStandardStreamableHTTPServerTransport`.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { isJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js"
import {
  type JSONRPCMessage,
  type JSONRPCRequest,
  JSONRPCRequestSchema,
  type MessageExtraInfo,
  SUPPORTED_PROTOCOL_VERSIONS
} from "@modelcontextprotocol/sdk/types.js"

/**
 * The request the SDK's stateless JSON-response transport would pass to its server as is,
 * or `undefined` when it would do anything else with it (answer 406, 415, 400 or -32700
 * itself, answer 202 for a notification or a response, negotiate an `initialize`, collect
 * a batch). Its checks for one message: the headers (`directHeaders`), then the message
 * schema. The message is the schema's output, as the SDK's is.
 */
export const directRequest = (headers: Readonly<Record<string, string | undefined>>, message: unknown): JSONRPCRequest | undefined => {
  if (!directHeaders(headers)) return undefined
  // Cheap shape checks first: a failing zod parse builds an error object.
  if (typeof message !== "object" || message === null || Array.isArray(message)) return undefined
  const { id, method } = message as { id?: unknown; method?: unknown }
  if ((typeof id !== "string" && typeof id !== "number") || typeof method !== "string" || method === "initialize") return undefined
  // The SDK parses with the union of message schemas; for a request its first member, this one, answers.
  const parsed = JSONRPCRequestSchema.safeParse(message)
  return parsed.success ? parsed.data : undefined
}

/**
 * Whether the SDK's stateless JSON-response transport passes a request with these headers on
 * (in its order: the Accept header, a substring test as the SDK's; the parsed Content-Type;
 * the `mcp-protocol-version` header, when there is one, a version it implements).
 */
export const directHeaders = (headers: Readonly<Record<string, string | undefined>>): boolean => {
  const accept = headers["accept"]
  if (accept === undefined || !accept.includes("application/json") || !accept.includes("text/event-stream")) return false
  if (!isJsonContentType(headers["content-type"] ?? null)) return false
  const version = headers["mcp-protocol-version"]
  return version === undefined || SUPPORTED_PROTOCOL_VERSIONS.includes(version)
}

/** An SDK protocol (a `Server`), as far as connecting it goes. */
interface Connectable {
  connect(transport: Transport): Promise<void>
}

/** How a connected SDK protocol takes one inbound request. */
type Dispatch = (request: JSONRPCRequest, extra: MessageExtraInfo) => void

/**
 * The protocol's own request entry: what the `onmessage` it installs on its transport calls
 * once it has classified a message as a request. That classification tries the message
 * as a result response, then as an error response (two failing zod parses, each building
 * an error and its message: about a twentieth of an MCP read's CPU), then as a request. A
 * `directRequest` has already passed the request schema, which no response passes (they
 * are strict objects without `method`), so handing it straight to this entry is what the
 * classification would do. The SDK has no public entry for it (it is private in 1.32.2,
 * the pinned version): when a version lacks it, `undefined`, and requests go through
 * `onmessage` as before.
 */
const requestEntryOf = (protocol: Connectable): Dispatch | undefined => {
  const entry = (protocol as unknown as { readonly _onrequest?: unknown })._onrequest
  return typeof entry === "function" ? (entry as Dispatch).bind(protocol) : undefined
}

/** A response (result or error) rather than a request or notification. */
const isResponse = (message: JSONRPCMessage): boolean => !("method" in message) && ("result" in message || "error" in message)

/**
 * The transport one SDK server stays connected to. One request at a time: `exchange` hands
 * it to the server and resolves with the server's response to it. Whatever else the server
 * sends meanwhile (progress or log notifications) is dropped, as the SDK's JSON-response
 * mode drops it.
 */
export class DirectTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined
  private answer: ((message: JSONRPCMessage) => void) | undefined
  /** The connected protocol's request entry, when `connectTo` found one. */
  private entry: Dispatch | undefined

  /** Connects `protocol` to this transport for good, taking requests through its request entry when it has one. */
  async connectTo(protocol: Connectable): Promise<void> {
    await protocol.connect(this)
    this.entry = requestEntryOf(protocol)
  }

  /** Whether requests skip the protocol's message classification (see `requestEntryOf`). */
  get direct(): boolean {
    return this.entry !== undefined
  }

  start(): Promise<void> {
    return Promise.resolve()
  }

  send(message: JSONRPCMessage): Promise<void> {
    const answer = this.answer
    if (answer !== undefined && isResponse(message)) {
      this.answer = undefined
      answer(message)
    }
    return Promise.resolve()
  }

  close(): Promise<void> {
    // Closed, it carries nothing (until a protocol connects to it again).
    this.entry = undefined
    this.onmessage = undefined
    this.onclose?.()
    return Promise.resolve()
  }

  /** The server's response to `request` (one at a time per transport). */
  exchange(request: JSONRPCRequest, extra: MessageExtraInfo): Promise<JSONRPCMessage> {
    if (this.answer !== undefined || this.onmessage === undefined) {
      return Promise.reject(new Error("DirectTransport: not connected, or already carrying a request"))
    }
    return new Promise((resolve) => {
      this.answer = resolve
      if (this.entry !== undefined) this.entry(request, extra)
      else this.onmessage!(request, extra)
    })
  }
}

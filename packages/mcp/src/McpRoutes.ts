/**
 * `POST {base}/mcp` and its OAuth discovery routes. Each request passes the bearer gate
 * (the same one as `/db/*`, for the `mcp` resource). A call of one of the tools that the
 * SDK server would hand to its handler as is (`DirectToolCall`) is answered on the
 * request's own fiber, with the JSON the SDK would send. Anything else is answered by an
 * SDK server taken from a pool (one request at a time each; the caller travels in the
 * transport's `authInfo`, never in the server): a plain JSON-RPC request over the transport
 * the server stays connected to (`DirectTransport`), anything else (initialize,
 * notifications, batches, malformed messages) over a fresh stateless web-standard transport
 * bridged into the HttpLayerRouter; the tools call the
 * same `DataPlane` every other transport uses, and its refusals are answered in MCP's
 * layers: 403 `insufficient_scope`, 503 for an unavailable database, a JSON-RPC error
 * for an overloaded writer or a defect.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  type JSONRPCRequest,
  ListToolsRequestSchema,
  type MessageExtraInfo
} from "@modelcontextprotocol/sdk/types.js"
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js"
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import type { Principal } from "@cairn/domain/Principal"
import { readScope, writeScope } from "@cairn/domain/AccessScope"
import { hotSpan } from "@cairn/domain/HotSpan"
import { BearerGate } from "@cairn/server/http/BearerGate"
import { DataPlane, type DataPlaneShape } from "@cairn/server/engine/DataPlane"
import { InsufficientScope, type Refusal, Unavailable } from "@cairn/server/engine/Refusal"
import { allowOf, routable } from "@cairn/server/http/MethodNotAllowed"
import { bodyText, isTooLarge, tooLargeAnswer } from "@cairn/server/http/RequestBody"
import { Settings } from "@cairn/server/operations/Settings"
import { HttpLayerRouter, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Exit, Layer, Option, Predicate, Runtime, Schema } from "effect"
import { callTool } from "./CallTool.js"
import { directToolCall, plainToolCall } from "./DirectToolCall.js"
import { directHeaders, DirectTransport, directRequest } from "./DirectTransport.js"
import { acceptedVersions, protocolProblem } from "./McpCompatibility.js"
import { McpConfig } from "./McpConfig.js"
import { invalidParams } from "./InvalidParams.js"
import { instructions, isToolName, tools } from "./McpTools.js"
import { metadata } from "./ProtectedResource.js"
import { answerText, ProtocolError } from "./ToolCallAnswer.js"

/** JSON-RPC error code of a retryable overload (a full writer queue); `data.retryAfterSeconds` says when. */
export const overloadedErrorCode = -32005

/** The `Allow` header of `/mcp`: stateless Streamable HTTP takes POST only. */
const allow = allowOf(["POST"])

const serverInfo = { name: "cairn", title: "Cairn", version: "1.0.0" }

// The SDK only validates elicitation answers, which this server never requests; skipping
// its default validator avoids building one per request.
const noValidator: jsonSchemaValidator = {
  getValidator: () => () => ({ valid: false, data: undefined, errorMessage: "This server requests no elicitation." })
}

const jsonRpcError = (status: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(
    { jsonrpc: "2.0", error: { code: -32000, message }, id: null },
    { status, headers: { "cache-control": "no-store", ...headers } }
  )

/** A tool call refused in the HTTP layer. */
class Refused {
  constructor(readonly refusal: InsufficientScope | Unavailable) {}
}

/**
 * Where a refused call's JSON-RPC error carries its refusal (`error.data`): the route reads it
 * from the SDK's answer and answers the whole request with it instead, so it is never sent.
 */
const refusalKey = "cairn.refusal"

const RefusalData = Schema.Union(
  Schema.TaggedStruct("InsufficientScope", { scope: Schema.Literal(readScope, writeScope), message: Schema.String }),
  Schema.TaggedStruct("Unavailable", { message: Schema.String, retryAfterSeconds: Schema.optional(Schema.Number) })
)
const decodeRefusalData = Schema.decodeUnknownOption(RefusalData)

/** The JSON-RPC error the SDK server sends for a refused call (never sent on: see `refusalIn`). */
const refusedError = (refusal: InsufficientScope | Unavailable) =>
  new ProtocolError(ErrorCode.InvalidRequest, refusal.message, {
    [refusalKey]: refusal._tag === "InsufficientScope"
      ? { _tag: refusal._tag, scope: refusal.scope, message: refusal.message }
      : { _tag: refusal._tag, message: refusal.message, ...(refusal.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: refusal.retryAfterSeconds }) }
  })

/** The refusal an SDK answer (one JSON-RPC message, or a batch of them) carries in an error's data, if any. */
const refusalIn = (answer: unknown): InsufficientScope | Unavailable | undefined => {
  if (Array.isArray(answer)) {
    for (const message of answer) {
      const refusal = refusalIn(message)
      if (refusal !== undefined) return refusal
    }
    return undefined
  }
  if (!Predicate.hasProperty(answer, "error") || !Predicate.hasProperty(answer.error, "data") || !Predicate.hasProperty(answer.error.data, refusalKey)) return undefined
  return Option.match(decodeRefusalData(answer.error.data[refusalKey]), {
    onNone: () => undefined,
    onSome: (data) => (data._tag === "InsufficientScope" ? new InsufficientScope(data) : new Unavailable(data))
  })
}

/** `refusalIn` for an answer's JSON text: parsed only when it may carry one. */
const refusalInText = (text: string | undefined): InsufficientScope | Unavailable | undefined =>
  text === undefined || !text.includes(refusalKey) ? undefined : refusalIn(parseJson(text)?.value)

/**
 * A tool run's outcome in MCP's layers: a tool result, a JSON-RPC error (an overloaded
 * writer, a defect, an interruption), or a refusal the HTTP layer answers (scope,
 * unavailable database).
 */
const toolAnswer = (exit: Exit.Exit<CallToolResult, Refusal>): CallToolResult | ProtocolError | Refused => {
  if (Exit.isSuccess(exit)) return exit.value
  const refusal = Cause.failureOption(exit.cause)
  if (Option.isNone(refusal)) return new ProtocolError(ErrorCode.InternalError, "The request was interrupted. Retry it.")
  switch (refusal.value._tag) {
    case "Overloaded":
      return new ProtocolError(overloadedErrorCode, refusal.value.message, { retryAfterSeconds: refusal.value.retryAfterSeconds })
    case "InternalFailure":
      return new ProtocolError(ErrorCode.InternalError, refusal.value.message)
    case "InsufficientScope":
    case "Unavailable":
      return new Refused(refusal.value)
  }
}

/** What one request's tool calls need, carried to the pooled server in the transport's `authInfo.extra`. */
interface Call {
  readonly principal: Principal
  readonly runtime: Runtime.Runtime<never>
}

const callKey = "cairn.call"

const callOf = (extra: { readonly authInfo?: AuthInfo | undefined }): Call => {
  const call = extra.authInfo?.extra?.[callKey] as Call | undefined
  if (call === undefined) throw new ProtocolError(ErrorCode.InternalError, "The request was not admitted. Retry it.")
  return call
}

/** One SDK server; it answers for whoever the transport's `authInfo` names. */
const makeServer = (plane: DataPlaneShape): Server => {
  const server = new Server(serverInfo, {
    capabilities: { tools: { listChanged: false } },
    instructions,
    jsonSchemaValidator: noValidator
  })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools] }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const name = request.params.name
    if (!isToolName(name)) {
      throw new ProtocolError(ErrorCode.InvalidParams, `Unknown tool "${name}". This server has exactly three tools: describe, query, mutate.`)
    }
    const { principal, runtime } = callOf(extra)
    const answer = toolAnswer(await Runtime.runPromiseExit(runtime)(callTool(plane, principal, name, request.params.arguments)))
    if (answer instanceof ProtocolError) throw answer
    // The refusal travels in the answer, for the route to answer the whole request with it.
    if (answer instanceof Refused) throw refusedError(answer.refusal)
    return answer
  })
  return server
}

/** Idle servers kept for reuse, per kind (more are made under more concurrency, and dropped after). */
const POOL_SIZE = 32

/** An SDK server connected for good to its own direct transport. */
interface Lane {
  readonly server: Server
  readonly transport: DirectTransport
}

const parseJson = (text: string): { readonly value: unknown } | undefined => {
  try {
    return { value: JSON.parse(text) as unknown }
  } catch {
    return undefined
  }
}

/** A request to a served method whose params have the wrong shape: `-32602`, one sentence (see `InvalidParams`). */
const invalidRequest = (message: unknown): HttpServerResponse.HttpServerResponse | undefined => {
  const invalid = invalidParams(message)
  if (invalid === undefined) return undefined
  return HttpServerResponse.unsafeJson(
    { jsonrpc: "2.0", id: invalid.id, error: { code: ErrorCode.InvalidParams, message: invalid.message } },
    { status: 200, headers: { "cache-control": "no-store" } }
  )
}

/**
 * What the SDK's JSON-response mode answers for one request: the response alone, 200,
 * application/json. Handed to Node as a string (with its byte length, as `text` would set
 * it): Node encodes it straight into the socket write, without an intermediate byte array.
 */
const jsonAnswer = (text: string): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.raw(text, { status: 200, contentType: "application/json", contentLength: Buffer.byteLength(text) })

/** The SDK's answer as the router sends it: its status and headers, and its body already read. */
const toResponse = (answer: Response, text: string | undefined): HttpServerResponse.HttpServerResponse => {
  const headers: Record<string, string> = {}
  answer.headers.forEach((value, name) => {
    // The body may be corrected (`batchAnswer`): its length is set from the text sent.
    if (name !== "content-type" && name !== "set-cookie" && name !== "content-length") headers[name] = value
  })
  const init = { status: answer.status, statusText: answer.statusText, headers }
  if (text === undefined) return HttpServerResponse.empty(init)
  return HttpServerResponse.text(text, { ...init, contentType: answer.headers.get("content-type") ?? "application/json" })
}

/**
 * The SDK's answer to a batch, with the answer to each member whose params have the wrong shape
 * replaced by `-32602` in one sentence (the SDK answers those `-32603` with its validator's dump);
 * `undefined` when nothing needs replacing.
 */
const batchAnswer = (batch: unknown, text: string | undefined): string | undefined => {
  if (!Array.isArray(batch) || text === undefined) return undefined
  const invalid = new Map<unknown, string>()
  for (const message of batch) {
    const problem = invalidParams(message)
    if (problem !== undefined && problem.id !== null) invalid.set(problem.id, problem.message)
  }
  if (invalid.size === 0) return undefined
  const answers = parseJson(text)?.value
  if (!Array.isArray(answers)) return undefined
  return JSON.stringify(
    answers.map((answer: unknown) =>
      Predicate.hasProperty(answer, "error") && Predicate.hasProperty(answer, "id") && invalid.has(answer.id)
        ? { jsonrpc: "2.0", id: answer.id, error: { code: ErrorCode.InvalidParams, message: invalid.get(answer.id) } }
        : answer
    )
  )
}

/** The MCP endpoint and its RFC 9728 metadata routes. */
export const McpRoutes = HttpLayerRouter.use(
  Effect.fnUntraced(function* (router) {
    const settings = yield* Settings
    const config = yield* McpConfig
    const gate = yield* BearerGate
    const plane = yield* DataPlane
    const document = metadata(settings.baseUrl, config.authorizationServers)
    const accepted = yield* Effect.orDie(acceptedVersions)

    const metadataResponse = HttpServerResponse.unsafeJson(document, {
      headers: { "cache-control": "public, max-age=300", "access-control-allow-origin": "*" }
    })
    yield* router.add("GET", "/.well-known/oauth-protected-resource/mcp", metadataResponse)
    yield* router.add("GET", "/.well-known/oauth-protected-resource", metadataResponse)

    // Servers for the web-standard transport (connected per request), and lanes (connected for good).
    const idle: Array<Server> = []
    const lanes: Array<Lane> = []

    /** The server's response to one direct request, from a lane of the pool. */
    const exchange = async (message: JSONRPCRequest, extra: MessageExtraInfo) => {
      let lane = lanes.pop()
      if (lane === undefined) {
        const server = makeServer(plane)
        const transport = new DirectTransport()
        await transport.connectTo(server)
        lane = { server, transport }
      }
      const answer = await lane.transport.exchange(message, extra)
      if (lanes.length < POOL_SIZE) lanes.push(lane)
      else await lane.server.close()
      return answer
    }

    // A span only for a configured tracer: every MCP request passes here.
    const handle = (request: HttpServerRequest.HttpServerRequest) =>
      hotSpan("Mcp.request")(handleBody(request))

    const handleBody = Effect.fnUntraced(function* (request: HttpServerRequest.HttpServerRequest) {
      // Authentication comes first: nothing about the endpoint is revealed to anonymous callers.
      const admitted = yield* Effect.either(gate.authenticate(request, "mcp"))
      if (admitted._tag === "Left") return admitted.left
      const principal = admitted.right
      // A client asking what the endpoint takes (a browser's preflight from a foreign Origin was refused before).
      if (request.method === "OPTIONS") return HttpServerResponse.empty({ status: 204, headers: { allow } })
      if (request.method !== "POST") {
        // Stateless: no standalone SSE stream to open (GET) and no session to end (DELETE).
        return jsonRpcError(405, "Method not allowed: this endpoint is stateless and accepts only POST.", { allow })
      }

      // A body crossing the limit as it streams in gets the front's 413, as one declared too large does.
      const read = yield* Effect.either(bodyText(request))
      if (read._tag === "Left") return isTooLarge(read.left) ? yield* tooLargeAnswer(config.maxBodyBytes) : yield* read.left
      const body = read.right
      // Parsed once, here; the SDK takes the parsed message (and answers -32700 itself when there is none).
      const parsed = parseJson(body)
      const malformed = parsed === undefined ? undefined : invalidRequest(parsed.value)
      if (malformed !== undefined) return malformed
      const unsupported = protocolProblem(request.headers["mcp-protocol-version"], parsed?.value, accepted)
      if (unsupported !== undefined) return jsonRpcError(400, unsupported)

      // The common request, a call of one of the tools, runs on this fiber (see `DirectToolCall`):
      // recognized in its plainest form without a schema, else by the SDK's schemas.
      const plain = parsed !== undefined && directHeaders(request.headers) ? plainToolCall(parsed.value) : undefined
      const direct = plain !== undefined || parsed === undefined ? undefined : directRequest(request.headers, parsed.value)
      const toolCall = plain ?? (direct === undefined ? undefined : directToolCall(direct))
      if (toolCall !== undefined) {
        const answer = toolAnswer(yield* Effect.exit(callTool(plane, principal, toolCall.name, toolCall.arguments)))
        if (answer instanceof Refused) return yield* gate.refuse("mcp", principal, answer.refusal)
        return jsonAnswer(answerText(toolCall.id, answer))
      }

      const runtime = yield* Effect.runtime<never>()
      const call: Call = { principal, runtime }
      const authInfo: AuthInfo = { token: "", clientId: principal.subject, scopes: [...principal.scopes], extra: { [callKey]: call } }
      if (direct !== undefined) {
        const message = yield* Effect.promise(() => exchange(direct, { authInfo, requestInfo: { headers: request.headers } }))
        const refusal = refusalIn(message)
        if (refusal !== undefined) return yield* gate.refuse("mcp", principal, refusal)
        return jsonAnswer(JSON.stringify(message))
      }

      // The SDK reads the body only when it is handed no parsed message (to answer -32700).
      const webRequest = new Request(new URL(request.url, settings.baseUrl), {
        method: "POST",
        headers: Object.entries(request.headers),
        ...(parsed === undefined ? { body } : {})
      })
      const response = yield* Effect.promise(async () => {
        const server = idle.pop() ?? makeServer(plane)
        // No sessionIdGenerator: stateless, so any instance can answer any request.
        const transport = new WebStandardStreamableHTTPServerTransport({
          enableJsonResponse: true,
          maxRequestBodySize: config.maxBodyBytes
        })
        let reusable = false
        try {
          await server.connect(transport)
          const answer = await transport.handleRequest(webRequest, parsed === undefined ? { authInfo } : { parsedBody: parsed.value, authInfo })
          // JSON responses only (no SSE): read whole here instead of bridging a web stream per request.
          const text = answer.body === null ? undefined : await answer.text()
          reusable = true
          return { answer, text }
        } finally {
          // Closing the transport disconnects the server from it: the server is free for the next request.
          await transport.close()
          if (reusable && server.transport === undefined && idle.length < POOL_SIZE) idle.push(server)
          else await server.close()
        }
      })
      const refusal = refusalInText(response.text)
      if (refusal !== undefined) return yield* gate.refuse("mcp", principal, refusal)
      return toResponse(response.answer, batchAnswer(parsed?.value, response.text) ?? response.text)
    })

    // Every method is routed here: after the gate, anything but POST is told what the endpoint takes.
    for (const method of routable) {
      yield* router.add(method, "/mcp", (request) =>
        handle(request).pipe(
          Effect.catchAll(() => Effect.succeed(jsonRpcError(400, "Bad Request: the request body could not be read.")))
        )
      )
    }
  })
)

/** `McpRoutes` with its configuration read from the environment. */
export const McpRoutesLive = McpRoutes.pipe(Layer.provide(McpConfig.layerConfig))

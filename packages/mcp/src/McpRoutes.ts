/**
 * `POST {base}/mcp` and its OAuth discovery routes. Each request authenticates first,
 * then gets a fresh stateless SDK server and web-standard transport bridged into the
 * HttpLayerRouter; the tools call the same `DataPlane` every other transport uses.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js"
import type { Principal } from "@cairn/domain"
import { Correlation, DataPlane, type DataPlaneShape, Identity, Settings } from "@cairn/server"
import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Exit, Layer, Runtime } from "effect"
import { callTool } from "./CallTool.js"
import { QueryLimits, type QueryLimitsShape } from "@cairn/query"
import { rejection } from "./internal/origin.js"
import { McpConfig } from "./McpConfig.js"
import { instructions, isToolName, requiredScope, type Scope, scopes, tools } from "./McpTools.js"
import { challenge, metadata } from "./ProtectedResource.js"

/** JSON-RPC error code of a retryable overload (a full writer queue); `data.retryAfterSeconds` says when. */
export const overloadedErrorCode = -32005

/**
 * A JSON-RPC error the SDK sends as is (its own `McpError` prefixes the message with
 * "MCP error <code>:", which only repeats the code to an agent).
 */
class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown
  ) {
    super(message)
  }
}

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

const oauthError = (status: number, wwwAuthenticate: string, error: string, description: string) =>
  HttpServerResponse.unsafeJson(
    { error, error_description: description },
    { status, headers: { "www-authenticate": wwwAuthenticate, "cache-control": "no-store" } }
  )

/** Scopes to ask for when stepping up: what the token already has plus what the call needs. */
const stepUpScopes = (principal: Principal, needed: Scope): ReadonlyArray<string> =>
  scopes.filter((s) => s === needed || principal.scopes.includes(s))

interface Outcome {
  /** Set when a tool call lacked its scope: the whole HTTP answer becomes a 403 challenge. */
  missingScope?: Scope
}

const makeServer = (
  plane: DataPlaneShape,
  principal: Principal,
  runtime: Runtime.Runtime<never>,
  outcome: Outcome,
  queryLimits: QueryLimitsShape
): Server => {
  const server = new Server(serverInfo, {
    capabilities: { tools: { listChanged: false } },
    instructions,
    jsonSchemaValidator: noValidator
  })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools] }))
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const name = request.params.name
    if (!isToolName(name)) {
      throw new ProtocolError(ErrorCode.InvalidParams, `Unknown tool "${name}". This server has exactly three tools: describe, query, mutate.`)
    }
    const needed = requiredScope[name]
    if (!principal.scopes.includes(needed)) {
      outcome.missingScope = needed
      throw new ProtocolError(ErrorCode.InvalidRequest, `The access token lacks the ${needed} scope.`)
    }
    const exit = await Runtime.runPromiseExit(runtime)(
      callTool(plane, principal, name, request.params.arguments).pipe(Effect.provideService(QueryLimits, queryLimits))
    )
    if (Exit.isSuccess(exit)) return exit.value
    const failure = Cause.failureOption(exit.cause)
    if (failure._tag === "Some") {
      throw new ProtocolError(overloadedErrorCode, failure.value.message, { retryAfterSeconds: failure.value.retryAfterSeconds })
    }
    const reference = await Runtime.runPromise(runtime)(
      Effect.tap(Correlation.id, () => Effect.logError("MCP tool call failed", exit.cause).pipe(Effect.annotateLogs({ tool: name })))
    )
    throw new ProtocolError(ErrorCode.InternalError, `The request failed inside the server; it was logged as ${reference}. Retry later.`)
  })
  return server
}

const bearerToken = (authorization: string | undefined): string | undefined => {
  const match = authorization === undefined ? null : /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(authorization)
  return match ? match[1] : undefined
}

/** The MCP endpoint and its RFC 9728 metadata routes. */
export const McpRoutes = HttpLayerRouter.use(
  Effect.fnUntraced(function* (router) {
    const settings = yield* Settings
    const config = yield* McpConfig
    const identity = yield* Identity
    const plane = yield* DataPlane
    // The operator's query budget, which the strict query decoder checks filters against.
    const queryLimits = yield* QueryLimits
    const base = settings.baseUrl
    const document = metadata(base, config.authorizationServers)

    const metadataResponse = HttpServerResponse.unsafeJson(document, {
      headers: { "cache-control": "public, max-age=300", "access-control-allow-origin": "*" }
    })
    yield* router.add("GET", "/.well-known/oauth-protected-resource/mcp", metadataResponse)
    yield* router.add("GET", "/.well-known/oauth-protected-resource", metadataResponse)

    const handle = Effect.fn("Mcp.request")(function* (request: HttpServerRequest.HttpServerRequest) {
      // Authentication comes first: nothing about the endpoint is revealed to anonymous callers.
      const url = new URL(request.url, base)
      if (url.searchParams.has("access_token")) {
        return oauthError(
          400,
          challenge(base, { error: "invalid_request", description: "Send the access token in the Authorization header, never in the URL." }),
          "invalid_request",
          "Send the access token in the Authorization header, never in the URL."
        )
      }
      const token = bearerToken(request.headers["authorization"])
      if (token === undefined) {
        const malformed = request.headers["authorization"] !== undefined
        const description = "A bearer access token for this resource is required."
        return oauthError(
          401,
          challenge(base, malformed ? { error: "invalid_request", description: "The Authorization header must be \"Bearer <token>\".", scope: scopes } : { scope: scopes }),
          malformed ? "invalid_request" : "invalid_token",
          malformed ? "The Authorization header must be \"Bearer <token>\"." : description
        )
      }
      const verified = yield* Effect.either(identity.verify(token, "mcp"))
      if (verified._tag === "Left") {
        return oauthError(
          401,
          challenge(base, { error: verified.left.error, description: verified.left.description, scope: scopes }),
          verified.left.error,
          verified.left.description
        )
      }
      const principal = verified.right

      const refused = rejection(base, { host: request.headers["host"], origin: request.headers["origin"] })
      if (refused !== undefined) return jsonRpcError(403, `Forbidden: ${refused}`)

      if (request.method !== "POST") {
        // Stateless: no standalone SSE stream to open (GET) and no session to end (DELETE).
        return jsonRpcError(405, "Method not allowed: this endpoint is stateless and accepts only POST.", { allow: "POST" })
      }

      const runtime = yield* Effect.runtime<never>()
      const webRequest = yield* HttpServerRequest.toWeb(request)
      const outcome: Outcome = {}
      const response = yield* Effect.promise(async () => {
        const server = makeServer(plane, principal, runtime, outcome, queryLimits)
        // No sessionIdGenerator: stateless, so any instance can answer any request.
        const transport = new WebStandardStreamableHTTPServerTransport({
          enableJsonResponse: true,
          maxRequestBodySize: config.maxBodyBytes
        })
        try {
          await server.connect(transport)
          return await transport.handleRequest(webRequest)
        } finally {
          await transport.close()
          await server.close()
        }
      })
      if (outcome.missingScope !== undefined) {
        const scope = stepUpScopes(principal, outcome.missingScope)
        return oauthError(
          403,
          challenge(base, { error: "insufficient_scope", description: `This call requires the ${outcome.missingScope} scope.`, scope }),
          "insufficient_scope",
          `This call requires the ${outcome.missingScope} scope.`
        )
      }
      return HttpServerResponse.fromWeb(response)
    })

    for (const method of ["POST", "GET", "DELETE"] as const) {
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

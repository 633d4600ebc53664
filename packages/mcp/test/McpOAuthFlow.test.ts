// The official SDK client completes the whole OAuth flow on its own against the
// development authorization server (discovery from the 401, dynamic registration, PKCE,
// token for the `{base}/mcp` resource); only the login page is driven programmatically,
// where a person would click. Then it works through the tools as an agent would.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { type OAuthClientProvider, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import { assert, describe, it } from "@effect/vitest"
import { signIn } from "@cairn/server/DevAuthServer"
import { Effect } from "effect"
import { decodeJwt } from "jose"
import { startStack } from "./support/stack.js"

/** An in-memory OAuth client, as a desktop MCP client would keep it. */
class MemoryProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ""
  authorizationUrl: URL | undefined
  readonly redirectUrl = "http://127.0.0.1:9/callback"
  get clientMetadata() {
    return {
      client_name: "Cairn flow test",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none"
    }
  }
  clientInformation() {
    return this.client
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info
  }
  tokens() {
    return this.saved
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}

describe("SDK client OAuth flow", () => {
  it.scoped("discovers, registers, signs in with PKCE, gets a resource-bound token, then uses the tools", () =>
    Effect.gen(function* () {
      const stack = yield* startStack()
      const provider = new MemoryProvider()
      const url = new URL(stack.mcpUrl)

      // 1. The first connect meets the 401 and runs discovery and registration.
      const first = new Client({ name: "flow", version: "1.0.0" })
      const refused = yield* Effect.promise(() =>
        first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider })).then(
          () => undefined,
          (error: unknown) => error
        )
      )
      assert.instanceOf(refused, UnauthorizedError)
      assert.isDefined(provider.client, "the client registered itself dynamically")
      const authorizationUrl = provider.authorizationUrl!
      assert.strictEqual(authorizationUrl.origin, stack.issuer)
      assert.strictEqual(authorizationUrl.searchParams.get("resource"), stack.mcpUrl)
      assert.strictEqual(authorizationUrl.searchParams.get("code_challenge_method"), "S256")
      assert.strictEqual(authorizationUrl.searchParams.get("scope"), "cairn:read cairn:write")
      assert.isAbove(provider.verifier.length, 42)

      // 2. The person signs in; the client finishes with the code and its verifier.
      const back = yield* signIn(authorizationUrl, { sub: "alice", org: "acme", roles: ["admin"] })
      const transport = new StreamableHTTPClientTransport(url, { authProvider: provider })
      yield* Effect.promise(() => transport.finishAuth(back.searchParams.get("code")!))
      const claims = decodeJwt(provider.saved!.access_token)
      assert.strictEqual(claims.aud, stack.mcpUrl)
      assert.strictEqual(claims.iss, stack.issuer)
      assert.strictEqual(claims.sub, "alice")
      assert.strictEqual(claims["org"], "acme")

      // 3. Connected: three tools, and describe answers with a catalog token.
      const client = new Client({ name: "flow", version: "1.0.0" })
      yield* Effect.acquireRelease(
        Effect.promise(() => client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))),
        () => Effect.promise(() => client.close())
      )
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((t) => t.name), ["describe", "query", "mutate"])
      const described = yield* Effect.promise(() =>
        client.callTool({ name: "describe", arguments: { inspect: [{ kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" }] } })
      )
      assert.isUndefined(described.isError)
      const { catalogToken } = described.structuredContent as { catalogToken: string }
      assert.isString(catalogToken)
    })
  )
})

// The official SDK client completes the whole OAuth flow on its own against the
// development authorization server (discovery from the 401, dynamic registration, PKCE,
// token for the `{base}/mcp` resource); only the login page is driven programmatically,
// where a person would click. Then it works through the tools as an agent would.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { type OAuthClientProvider, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import { assert, describe, it } from "@effect/vitest"
import { Entity, Migration, RootSchema } from "@cairn/catalog"
import { DevAuthServer } from "@cairn/devauth"
const { signIn } = DevAuthServer
import { tracker } from "@cairn/testkit/fixture/tracker"
import { trackerApplication } from "@cairn/testkit/fixture/application"
import { Effect, Schema } from "effect"
import { decodeJwt } from "jose"
import { v7 as uuidv7 } from "uuid"
import { startStack } from "./support/stack.js"

/**
 * The next release of the tracker: one additive entity, and a declared migration covering
 * Project (a new version of that definition): tokens issued before still guard requests that
 * touch only unchanged definitions, and fail `catalog_changed` on Project.
 */
const trackerNext = RootSchema.make("tracker", {
  traits: tracker.traits,
  entities: [
    ...tracker.entities,
    Entity.make("Milestone", {
      description: "A dated goal within a project.",
      fields: { projectId: Schema.String, title: Schema.String, due: Schema.optional(Schema.String) }
    })
  ],
  operations: tracker.operations,
  migrations: [Migration.make({ name: "project-v2", description: "Projects are read anew.", covers: ["Project"] })]
})

type ToolResult = { readonly isError?: boolean; readonly structuredContent?: any; readonly content?: any }

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
  it.live("discovers, registers, signs in with PKCE, then describe, query, mutate, replay, invocation_conflict, catalog_changed", () =>
    Effect.gen(function* () {
      const provider = new MemoryProvider()
      const first = yield* Effect.scoped(firstRelease(provider))
      // The operator deploys the next release on the same data; the client's token stays valid.
      yield* Effect.scoped(nextRelease(provider, first))
    })
  )
})

const firstRelease = (provider: MemoryProvider) =>
    Effect.gen(function* () {
      const stack = yield* startStack()
      const url = new URL(stack.mcpUrl)

      // 1. The first connect meets the 401 and runs discovery and registration.
      const unauthenticated = new Client({ name: "flow", version: "1.0.0" })
      const refused = yield* Effect.promise(() =>
        unauthenticated.connect(new StreamableHTTPClientTransport(url, { authProvider: provider })).then(
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

      // 3. Connected: exactly three tools.
      const client = yield* connect(provider, url)
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((t) => t.name), ["describe", "query", "mutate"])
      const call = (name: string, args: Record<string, unknown>) =>
        Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<ToolResult>)

      // 4. describe: inspect the operation to learn its input; keep the catalog token.
      const described = yield* call("describe", { inspect: [{ kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" }] })
      assert.isUndefined(described.isError)
      const catalogToken = described.structuredContent.catalogToken as string
      assert.deepStrictEqual(described.structuredContent.definitions[0].input.required, ["name"])

      // 5. query: nothing yet.
      const projects = {
        version: 1,
        from: { kind: "entity", name: "Project" },
        select: { id: { path: ["id"] }, name: { path: ["name"] } },
        order: [{ path: ["name"], direction: "asc" }]
      }
      const empty = yield* call("query", { ifCatalog: catalogToken, query: projects })
      assert.isUndefined(empty.isError, JSON.stringify(empty.structuredContent))
      assert.deepStrictEqual(empty.structuredContent.rows, [])
      assert.strictEqual(empty.structuredContent.basis.catalogToken, catalogToken)

      // 6. mutate, then replay the same invocation: the same durable receipt.
      const create = {
        ifCatalog: catalogToken,
        operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
        input: { name: "Launch" },
        invocationId: uuidv7()
      }
      const created = yield* call("mutate", create)
      assert.isUndefined(created.isError, JSON.stringify(created.structuredContent))
      const receipt = created.structuredContent
      assert.strictEqual(receipt.outcome, "committed")
      assert.strictEqual(receipt.invocationId, create.invocationId)
      assert.isString(receipt.output.id)
      assert.deepStrictEqual(JSON.parse(created.content[0].text), receipt)

      const replayed = yield* call("mutate", create)
      assert.isUndefined(replayed.isError)
      assert.deepStrictEqual(replayed.structuredContent, receipt)

      // The effect happened once.
      const one = yield* call("query", { ifCatalog: catalogToken, query: projects })
      assert.deepStrictEqual(one.structuredContent.rows, [{ id: receipt.output.id, name: "Launch" }])

      // A targeted operation, and a query through a relationship path.
      const task = yield* call("mutate", {
        ifCatalog: catalogToken,
        operation: { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "create" },
        input: { projectId: receipt.output.id, title: "Write the announcement", priority: 1 },
        invocationId: uuidv7()
      })
      assert.isUndefined(task.isError, JSON.stringify(task.structuredContent))
      const tasks = yield* call("query", {
        ifCatalog: catalogToken,
        query: {
          version: 1,
          from: { kind: "entity", name: "Task" },
          where: { op: "eq", path: ["status"], value: "open" },
          select: { title: { path: ["title"] }, project: { path: ["project", "name"] } }
        }
      })
      assert.deepStrictEqual(tasks.structuredContent.rows, [{ title: "Write the announcement", project: "Launch" }])

      // 7. The same invocation id with a different intent.
      const conflict = yield* call("mutate", { ...create, input: { name: "Something else" } })
      assert.isTrue(conflict.isError)
      assert.strictEqual(conflict.structuredContent.code, "invocation_conflict")
      assert.strictEqual(conflict.structuredContent.recovery, "Fix the caller's state; use a new invocationId only for a new intent.")
      assert.include(conflict.content[0].text, "invocation_conflict: ")

      return { catalogToken, port: stack.port, issuerPort: stack.issuerPort, dataDir: stack.dataDir, projectId: receipt.output.id as string }
    })

const connect = (provider: MemoryProvider, url: URL) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "flow", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

const nextRelease = (
  provider: MemoryProvider,
  before: { readonly catalogToken: string; readonly port: number; readonly issuerPort: number; readonly dataDir: string; readonly projectId: string }
) =>
  Effect.gen(function* () {
    const stack = yield* startStack({ application: { ...trackerApplication, root: trackerNext }, reuse: before })
    const client = yield* connect(provider, new URL(stack.mcpUrl))
    const call = (name: string, args: Record<string, unknown>) =>
      Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<ToolResult>)

    // 8. A request built against the previous catalog is refused, not reinterpreted.
    const stale = yield* call("mutate", {
      ifCatalog: before.catalogToken,
      operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "archive" },
      target: { kind: "entity", entity: "Project", id: before.projectId },
      input: {},
      invocationId: uuidv7()
    })
    assert.isTrue(stale.isError)
    assert.strictEqual(stale.structuredContent.code, "catalog_changed")
    const current = stale.structuredContent.catalogToken as string
    assert.notStrictEqual(current, before.catalogToken)
    const staleQuery = yield* call("query", {
      ifCatalog: before.catalogToken,
      query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } }
    })
    assert.strictEqual(staleQuery.structuredContent.code, "catalog_changed")
    // The additive entity and the migrated Project leave Task as it was: the old token still guards it.
    const unchanged = yield* call("query", {
      ifCatalog: before.catalogToken,
      query: { version: 1, from: { kind: "entity", name: "Task" }, select: { title: { path: ["title"] } } }
    })
    assert.isNotTrue(unchanged.isError, JSON.stringify(unchanged.structuredContent))

    // Recovery as the error says: describe again, rebuild, and the data is still there.
    const again = yield* call("describe", { browse: { kinds: ["entity"] } })
    assert.strictEqual(again.structuredContent.catalogToken, current)
    const rows = yield* call("query", {
      ifCatalog: current,
      query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } }
    })
    assert.deepStrictEqual(rows.structuredContent.rows, [{ name: "Launch" }])
  })

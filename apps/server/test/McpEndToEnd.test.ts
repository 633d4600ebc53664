// The MCP endpoint end to end: the server exactly as `npm start` assembles it, the
// official SDK client over Streamable HTTP with real development tokens, next to the
// generated bindings on `/db/rpc`. It proves that both transports sit on one engine (what
// one commits the other reads; an invocation committed through one replays through the
// other), that tokens are bound to their resource, and that MCP shows each caller only
// its org and its policy, with hidden things answering like nonexistent ones.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { assert, describe, it } from "@effect/vitest"
import { newInvocationId } from "@cairn/client/InvocationId"
import { tracker } from "@cairn/client/generated/tracker"
import { Effect } from "effect"
import { type Running, startApp, type Who } from "./support/app.js"

interface ToolResult {
  readonly isError?: boolean
  readonly structuredContent?: any
  readonly content?: ReadonlyArray<{ readonly type: string; readonly text?: string }>
}

/** An SDK client connected to `/mcp` as `who`, closed with the scope. */
const mcpClient = (app: Running, who: Who) =>
  Effect.gen(function* () {
    const token = yield* app.token({ ...who, resource: "mcp" })
    const client = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const c = new Client({ name: "cairn-e2e", version: "1.0.0" })
        await c.connect(new StreamableHTTPClientTransport(new URL(`${app.base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
        return c
      }),
      (c) => Effect.promise(() => c.close())
    )
    return {
      client,
      call: (name: string, args: Record<string, unknown>) =>
        Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<ToolResult>)
    }
  })

const operation = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })
const taskTitles = {
  version: 1,
  from: { kind: "entity", name: "Task" },
  select: { title: { path: ["title"] } },
  order: [{ path: ["title"], direction: "asc" }]
}
const missing = "01a20000-0000-7000-8000-000000000000"

describe("MCP through the real server", () => {
  it.scopedLive("publishes discovery and challenges an unauthenticated POST with resource_metadata", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const metadata = yield* Effect.promise(() => fetch(`${app.base}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json()))
      assert.strictEqual(metadata.resource, `${app.base}/mcp`)
      assert.deepStrictEqual(metadata.authorization_servers, [app.issuer])
      const server = yield* Effect.promise(() => fetch(`${app.issuer}/.well-known/oauth-authorization-server`).then((r) => r.json()))
      assert.strictEqual(server.issuer, app.issuer)
      assert.include(server.code_challenge_methods_supported, "S256")

      const refused = yield* Effect.promise(() =>
        fetch(`${app.base}/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
        })
      )
      assert.strictEqual(refused.status, 401)
      assert.include(refused.headers.get("www-authenticate") ?? "", `resource_metadata="${app.base}/.well-known/oauth-protected-resource/mcp"`)
    }))

  it.scopedLive("a token is good only for its own resource", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const dbToken = yield* app.token({ sub: "alice", org: "acme" })
      const mcpToken = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const atMcp = yield* Effect.promise(() =>
        fetch(`${app.base}/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${dbToken}` },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
        })
      )
      assert.strictEqual(atMcp.status, 401)
      assert.include(atMcp.headers.get("www-authenticate") ?? "", 'error="invalid_token"')
      const atDb = yield* Effect.either(app.as(mcpToken)(tracker.Project.query({ select: { id: { path: ["id"] } } })))
      assert.isTrue(atDb._tag === "Left" && atDb.left._tag === "Unauthenticated")
    }))

  it.scopedLive("MCP and /db/rpc are one engine: each reads what the other commits, and an invocation replays across them", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const edDb = app.as(yield* app.token({ sub: "ed", org: "acme" }))
      const project = (yield* root(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      yield* root(tracker.Member.add({ input: { projectId: project, subject: "ed", role: "editor", email: "ed@acme.test" } }))

      const ed = yield* mcpClient(app, { sub: "ed", org: "acme" })
      const { tools } = yield* Effect.promise(() => ed.client.listTools())
      assert.deepStrictEqual(tools.map((t) => t.name), ["describe", "query", "mutate"])

      // MCP reads what /db committed.
      const projects = yield* ed.call("query", { query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } } })
      assert.deepStrictEqual(projects.structuredContent.rows, [{ name: "Apollo" }])

      // /db reads what MCP committed.
      const create = { operation: operation("Task", "create"), input: { projectId: project, title: "Launch" }, invocationId: newInvocationId() }
      const created = yield* ed.call("mutate", create)
      assert.isUndefined(created.isError, JSON.stringify(created.structuredContent))
      assert.strictEqual(created.structuredContent.outcome, "committed")
      assert.deepStrictEqual((yield* edDb(tracker.Task.query({ select: { title: { path: ["title"] } } }))).rows, [{ title: "Launch" }])

      // The same intent sent again through /db is the same durable receipt, not a second task.
      const replayed = yield* edDb(tracker.Task.create({ input: create.input, invocationId: create.invocationId }))
      assert.deepStrictEqual(replayed, created.structuredContent)
      const task = created.structuredContent.output.id as string
      yield* edDb(tracker.Task.rename({ target: task, input: { title: "Liftoff" } }))
      const titles = yield* ed.call("query", { query: taskTitles })
      assert.deepStrictEqual(titles.structuredContent.rows, [{ title: "Liftoff" }])
    }), 30_000)

  it.scopedLive("a viewer, a non-admin and another org get answers identical to those for things that do not exist", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const project = (yield* root(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* root(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id
      yield* root(tracker.Member.add({ input: { projectId: project, subject: "vera", role: "viewer", email: "vera@acme.test" } }))

      const renameOf = (caller: { call: (name: string, args: Record<string, unknown>) => Effect.Effect<ToolResult> }, id: string) =>
        caller.call("mutate", {
          operation: operation("Task", "rename"),
          target: { kind: "entity", entity: "Task", id },
          input: { title: "nope" },
          invocationId: "01a20000-0000-7000-8000-0000000000aa"
        })

      // The viewer sees the task but may not change it.
      const vera = yield* mcpClient(app, { sub: "vera", org: "acme" })
      const seen = yield* vera.call("query", { query: taskTitles })
      assert.deepStrictEqual(seen.structuredContent.rows, [{ title: "Launch" }])
      const hidden = yield* renameOf(vera, task)
      assert.isTrue(hidden.isError)
      assert.strictEqual(hidden.structuredContent.code, "inaccessible")
      assert.strictEqual(JSON.stringify(hidden), JSON.stringify(yield* renameOf(vera, missing)))

      // An admin-only operation is, to a member, an operation that does not exist.
      const addMember = (name: string) =>
        vera.call("mutate", {
          operation: operation("Member", name),
          input: { projectId: project, subject: "mallory", role: "owner", email: "m@evil.test" },
          invocationId: "01a20000-0000-7000-8000-0000000000bb"
        })
      const adminOnly = yield* addMember("add")
      assert.strictEqual(adminOnly.structuredContent.code, "inaccessible")
      assert.strictEqual(JSON.stringify(adminOnly), JSON.stringify(yield* addMember("recruit")).replaceAll("recruit", "add"))
      const described = yield* vera.call("describe", { browse: { kinds: ["operation"] } })
      const names = (described.structuredContent.cards as ReadonlyArray<{ ref: { owner: { name: string }; name: string } }>).map(
        (card) => `${card.ref.owner.name}.${card.ref.name}`
      )
      assert.include(names, "Task.rename")
      assert.notInclude(names, "Member.add")

      // An admin of another org sees nothing of acme and reaches none of its ids.
      const gina = yield* mcpClient(app, { sub: "gina", org: "globex", roles: ["admin"] })
      const theirs = yield* gina.call("query", { query: taskTitles })
      assert.deepStrictEqual(theirs.structuredContent.rows, [])
      assert.strictEqual(JSON.stringify(yield* renameOf(gina, task)), JSON.stringify(yield* renameOf(gina, missing)))

      // Nothing of it changed the task.
      assert.deepStrictEqual((yield* root(tracker.Task.query({ select: { title: { path: ["title"] } } }))).rows, [{ title: "Launch" }])
      assert.deepStrictEqual((yield* root(tracker.Member.query({ select: { s: { path: ["subject"] } }, order: [{ path: ["subject"], direction: "asc" }] }))).rows, [
        { s: "root" },
        { s: "vera" }
      ])
    }), 30_000)
})

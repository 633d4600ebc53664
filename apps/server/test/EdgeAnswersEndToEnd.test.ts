// The spec's letter at the edges, through the real server: a capability the caller may not
// see answers `inaccessible` exactly as one that does not exist, on RPC and MCP alike (the
// name swapped, byte for byte); MCP keeps the receipt of a rejected intent as RPC does; a
// mistyped `initialize` is `-32602` in one sentence; an RPC the route does not serve is the
// gate's plain 400.
import { assert, describe, it } from "@effect/vitest"
import { tracker } from "@cairn/client/generated/tracker"
import { Effect } from "effect"
import { type Running, startApp } from "./support/app.js"

const operation = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })
const invocationId = (n: number) => `01a20000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

const post = (url: string, token: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${token}`, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    return { status: response.status, text: await response.text() }
  })

const rpc = (app: Running, token: string, tag: string, payload: unknown) =>
  post(`${app.base}/db/rpc`, token, { _tag: "Request", id: "1", tag, payload, headers: [] })

const mcpCall = (app: Running, token: string, name: string, args: unknown) =>
  Effect.map(
    post(`${app.base}/mcp`, token, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }, { "mcp-protocol-version": "2025-11-25" }),
    (answer) => ({ ...answer, json: JSON.parse(answer.text) })
  )

describe("hidden capabilities", () => {
  it.scopedLive("an operation outside the caller's view answers inaccessible, exactly as one that does not exist, on every way in", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const project = (yield* root(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      yield* root(tracker.Member.add({ input: { projectId: project, subject: "vera", role: "editor", email: "vera@acme.test" } }))
      const vera = yield* app.token({ sub: "vera", org: "acme" })
      const veraMcp = yield* app.token({ sub: "vera", org: "acme", resource: "mcp" })

      // Member.add is admin-only: to vera it is what Member.recruit (never defined) is.
      const mutateOf = (name: string) => ({
        operation: operation("Member", name),
        input: { projectId: project, subject: "mallory", role: "owner", email: "m@evil.test" },
        invocationId: invocationId(1)
      })
      const inspectOf = (name: string) => ({ inspect: [operation("Member", name)] })
      const pairs = [
        ["RPC Mutate", yield* rpc(app, vera, "Mutate", mutateOf("add")), yield* rpc(app, vera, "Mutate", mutateOf("recruit"))],
        ["RPC Describe", yield* rpc(app, vera, "Describe", inspectOf("add")), yield* rpc(app, vera, "Describe", inspectOf("recruit"))],
        ["MCP mutate", yield* mcpCall(app, veraMcp, "mutate", mutateOf("add")), yield* mcpCall(app, veraMcp, "mutate", mutateOf("recruit"))],
        ["MCP describe", yield* mcpCall(app, veraMcp, "describe", inspectOf("add")), yield* mcpCall(app, veraMcp, "describe", inspectOf("recruit"))]
      ] as const
      for (const [way, hidden, unknown] of pairs) {
        assert.strictEqual(hidden.status, 200, way)
        assert.strictEqual(hidden.text, unknown.text.replaceAll("recruit", "add"), way)
        assert.notInclude(hidden.text, "unknown_definition", way)
        assert.notInclude(hidden.text, "UnknownDefinition", way)
      }
      assert.include(pairs[0][1].text, '"_tag":"Inaccessible"')
      assert.include(pairs[1][1].text, '"_tag":"Inaccessible"')
      assert.strictEqual(pairs[2][1].json.result.structuredContent.code, "inaccessible")
      assert.strictEqual(pairs[3][1].json.result.structuredContent.code, "inaccessible")

      // An admin sees it: the refusal was the view, not the name.
      const admin = yield* app.token({ sub: "root", org: "acme", roles: ["admin"] })
      assert.include((yield* rpc(app, admin, "Describe", inspectOf("add"))).text, '"_tag":"Success"')
    }), 30_000)
})

describe("rejected intents over MCP", () => {
  it.scopedLive("carry their durable receipt, the same as RPC's, and a replay returns it again", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const project = (yield* root(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* root(tracker.Task.create({ input: { projectId: project, title: "Launch" } }))).output.id
      yield* root(tracker.Task.complete({ target: task }))
      const mcp = yield* app.token({ sub: "root", org: "acme", roles: ["admin"], resource: "mcp" })
      const complete = {
        operation: operation("Task", "complete"),
        target: { kind: "entity", entity: "Task", id: task },
        input: {},
        invocationId: invocationId(2)
      }
      const rejected = yield* mcpCall(app, mcp, "mutate", complete)
      const result = rejected.json.result
      assert.isTrue(result.isError)
      assert.strictEqual(result.structuredContent.code, "operation_rejected")
      const receipt = result.structuredContent.receipt
      assert.strictEqual(receipt.outcome, "rejected")
      assert.strictEqual(receipt.invocationId, complete.invocationId)
      assert.strictEqual(receipt.reason, "This task is already done.")
      assert.isString(receipt.position)
      // Text-only clients read it too.
      assert.include(result.content[0].text, `Receipt: ${JSON.stringify(receipt)}`)

      // A replay, on MCP and on RPC, returns the stored receipt: it was decided once, durably.
      const again = yield* mcpCall(app, mcp, "mutate", complete)
      assert.deepStrictEqual(again.json.result.structuredContent.receipt, receipt)
      const overRpc = JSON.parse((yield* rpc(app, yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }), "Mutate", complete)).text)
      assert.deepStrictEqual(overRpc[0].exit.cause.error.receipt, receipt)
    }), 30_000)
})

describe("answers on the allowed set", () => {
  it.scopedLive("a mistyped initialize or tools/list is -32602 in one sentence, never an internal error with a validator dump", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const mcp = yield* app.token({ sub: "root", org: "acme", resource: "mcp" })
      const initialize = (params: unknown) => post(`${app.base}/mcp`, mcp, { jsonrpc: "2.0", id: 7, method: "initialize", params })
      const cases = [
        [{ protocolVersion: 123, capabilities: {}, clientInfo: { name: "probe", version: "1" } }, "params.protocolVersion must be a string"],
        [{ protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: 5, version: "1" } }, "params.clientInfo.name must be a string"],
        [{ protocolVersion: "2025-11-25", capabilities: {} }, "params.clientInfo must be an object"],
        ["initialize me", "params must be an object"]
      ] as const
      for (const [params, sentence] of cases) {
        const answer = yield* initialize(params)
        assert.strictEqual(answer.status, 200, answer.text)
        const body = JSON.parse(answer.text)
        assert.strictEqual(body.id, 7)
        assert.strictEqual(body.error.code, -32602, answer.text)
        assert.include(body.error.message, sentence)
        assert.strictEqual(body.error.message.split(". ").length, 1, body.error.message)
        assert.notInclude(answer.text, "expected")
        assert.notInclude(answer.text, "invalid_type")
      }
      // A tool call whose name or _meta has the wrong type is the caller's mistake too.
      for (const params of [{ name: 5, arguments: {} }, { name: "describe", arguments: { browse: { kinds: ["entity"] } }, _meta: "x" }]) {
        const call = yield* post(`${app.base}/mcp`, mcp, { jsonrpc: "2.0", id: 9, method: "tools/call", params }, { "mcp-protocol-version": "2025-11-25" })
        const body = JSON.parse(call.text)
        assert.strictEqual(body.error.code, -32602, call.text)
        assert.notInclude(call.text, "invalid_type")
      }
      // In a batch too, each mistyped member is answered -32602.
      const batch = yield* post(`${app.base}/mcp`, mcp, [
        { jsonrpc: "2.0", id: 1, method: "initialize", params: cases[0][0] },
        { jsonrpc: "2.0", id: 2, method: "ping" }
      ])
      const answers = JSON.parse(batch.text) as ReadonlyArray<{ id: number; error?: { code: number; message: string } }>
      const first = answers.find((answer) => answer.id === 1)
      assert.strictEqual(first?.error?.code, -32602, batch.text)
      assert.include(first?.error?.message, cases[0][1])
      assert.notInclude(batch.text, "invalid_type")
      const list = yield* post(`${app.base}/mcp`, mcp, { jsonrpc: "2.0", id: 8, method: "tools/list", params: { cursor: 5 } }, { "mcp-protocol-version": "2025-11-25" })
      assert.strictEqual(JSON.parse(list.text).error.code, -32602, list.text)
      // A well-typed initialize still succeeds.
      const fine = yield* initialize({ protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "probe", version: "1" } })
      assert.strictEqual(JSON.parse(fine.text).result.protocolVersion, "2025-11-25", fine.text)
    }), 30_000)

  it.scopedLive("an RPC the route does not serve is the gate's plain 400, on /db/rpc and /db/sync", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const token = yield* app.token({ sub: "root", org: "acme" })
      const unknown = yield* rpc(app, token, "DropDatabase", {})
      assert.strictEqual(unknown.status, 400)
      const body = JSON.parse(unknown.text)
      assert.strictEqual(body.error, "invalid_request")
      assert.include(body.message, '"tag" must be one of Describe, Query, Mutate')
      assert.notInclude(unknown.text, "Defect")
      assert.notInclude(unknown.text, "DropDatabase")
      const sync = yield* post(`${app.base}/db/sync`, token, JSON.stringify({ _tag: "Request", id: "1", tag: "Describe", payload: {}, headers: [] }) + "\n", {
        "content-type": "application/ndjson"
      })
      assert.strictEqual(sync.status, 400, sync.text)
      assert.include(JSON.parse(sync.text).message, '"tag" must be one of SyncSnapshot, SyncChanges')
      // The served ones are still served.
      assert.strictEqual((yield* rpc(app, token, "Describe", { browse: { kinds: ["entity"] } })).status, 200)
    }), 30_000)
})

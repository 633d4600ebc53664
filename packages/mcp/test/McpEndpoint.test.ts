// The MCP endpoint over real HTTP with real tokens from the development authorization
// server: discovery metadata, authentication before anything else, DNS-rebinding
// protection, methods, protocol version, scopes with step-up challenges, tool results and
// errors, and a tool list that does not grow with the catalog.
import { request as httpRequest } from "node:http"
import { assert, describe, it, layer } from "@effect/vitest"
import { DescribeLimits, describe as describeCatalog } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { compile } from "@cairn/catalog/Catalog"
import { Overloaded } from "@cairn/domain/Overloaded"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { synthetic } from "@cairn/testkit/fixture/synthetic"
import { tracker } from "@cairn/testkit/fixture/tracker"
import { Effect, Layer, Redacted, Stream } from "effect"
import { v7 as uuidv7 } from "uuid"
import { initialize, openApplication, post, type Stack, startStack } from "./support/stack.js"

const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }
const call = (name: string, args: unknown, id = 3) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: args }
})
const v = { "mcp-protocol-version": "2025-11-25" }

class StackTag extends Effect.Tag("test/Stack")<StackTag, Stack>() {}
const StackLive = Layer.scoped(StackTag, startStack())

layer(StackLive, { timeout: 120_000, excludeTestServices: true })("MCP endpoint", (it) => {
  it.effect("publishes RFC 9728 metadata at the resource path and the root alias", () =>
    Effect.gen(function* () {
      const { base, issuer } = yield* StackTag
      for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
        const response = yield* Effect.promise(() => fetch(`${base}${path}`))
        assert.strictEqual(response.status, 200)
        assert.deepStrictEqual(yield* Effect.promise(() => response.json()), {
          resource: `${base}/mcp`,
          authorization_servers: [issuer],
          scopes_supported: ["cairn:read", "cairn:write"],
          bearer_methods_supported: ["header"],
          resource_name: "Cairn MCP endpoint"
        })
      }
    })
  )

  it.effect("answers 401 with resource_metadata to every method without a valid token", () =>
    Effect.gen(function* () {
      const { base, mcpUrl } = yield* StackTag
      const expected = `Bearer realm="cairn", scope="cairn:read cairn:write", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`
      for (const method of ["POST", "GET", "DELETE"]) {
        const response = yield* Effect.promise(() =>
          fetch(mcpUrl, { method, headers: { "content-type": "application/json" }, ...(method === "POST" ? { body: JSON.stringify(initialize) } : {}) })
        )
        assert.strictEqual(response.status, 401, method)
        assert.strictEqual(response.headers.get("www-authenticate"), expected)
      }
      const garbage = yield* post(mcpUrl, initialize, { authorization: "Bearer not.a.token" })
      assert.strictEqual(garbage.status, 401)
      assert.match(garbage.headers.get("www-authenticate")!, /^Bearer realm="cairn", error="invalid_token", error_description="[^"]+", scope="cairn:read cairn:write", resource_metadata="/)
      const basic = yield* post(mcpUrl, initialize, { authorization: "Basic YWxpY2U6c2VjcmV0" })
      assert.strictEqual(basic.status, 401)
      assert.include(basic.headers.get("www-authenticate")!, 'error="invalid_request"')
    })
  )

  it.effect("refuses tokens for another resource and tokens in the query string", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const dbToken = yield* token({ sub: "alice", org: "acme" }, { resource: "db" })
      const refused = yield* post(mcpUrl, initialize, { authorization: `Bearer ${dbToken}` })
      assert.strictEqual(refused.status, 401)
      assert.include(refused.headers.get("www-authenticate")!, 'error="invalid_token"')

      const mcpToken = yield* token({ sub: "alice", org: "acme" })
      const inQuery = yield* post(`${mcpUrl}?access_token=${mcpToken}`, initialize)
      assert.strictEqual(inQuery.status, 400)
      assert.include(inQuery.headers.get("www-authenticate")!, 'error="invalid_request"')
      // Even alongside a valid header: a token in a URL has already leaked into logs.
      const both = yield* post(`${mcpUrl}?access_token=${mcpToken}`, initialize, { authorization: `Bearer ${mcpToken}` })
      assert.strictEqual(both.status, 400)
      const ok = yield* post(mcpUrl, initialize, { authorization: `Bearer ${mcpToken}` })
      assert.strictEqual(ok.status, 200)
      assert.strictEqual(ok.json.result.serverInfo.name, "cairn")
      assert.deepStrictEqual(ok.json.result.capabilities, { tools: { listChanged: false } })
    })
  )

  it.effect("after authentication: foreign Origin or Host 403, other methods 405 with Allow (OPTIONS 204), bad protocol version 400", () =>
    Effect.gen(function* () {
      const { base, mcpUrl, token } = yield* StackTag
      const auth = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" })}` }
      const port = new URL(base).port

      const foreignOrigin = yield* post(mcpUrl, initialize, { ...auth, origin: "http://evil.example.com" })
      assert.strictEqual(foreignOrigin.status, 403)
      const otherPort = yield* post(mcpUrl, initialize, { ...auth, origin: "http://127.0.0.1:1" })
      assert.strictEqual(otherPort.status, 403)
      const sameOrigin = yield* post(mcpUrl, initialize, { ...auth, origin: base })
      assert.strictEqual(sameOrigin.status, 200)
      const loopbackSpelling = yield* post(mcpUrl, initialize, { ...auth, origin: `http://localhost:${port}` })
      assert.strictEqual(loopbackSpelling.status, 200)

      // fetch() will not forge Host; a raw request does.
      const evilHost = yield* Effect.promise(
        () =>
          new Promise<number>((resolve, reject) => {
            const req = httpRequest(
              { host: "127.0.0.1", port: Number(port), path: "/mcp", method: "POST", headers: { ...auth, host: "evil.example.com", "content-type": "application/json", accept: "application/json, text/event-stream" } },
              (res) => {
                res.resume()
                resolve(res.statusCode ?? 0)
              }
            )
            req.on("error", reject)
            req.end(JSON.stringify(initialize))
          })
      )
      assert.strictEqual(evilHost, 403)

      for (const method of ["GET", "DELETE", "PUT", "PATCH"]) {
        const response = yield* Effect.promise(() => fetch(mcpUrl, { method, headers: { ...auth, accept: "text/event-stream" } }))
        assert.strictEqual(response.status, 405, method)
        assert.strictEqual(response.headers.get("allow"), "POST, OPTIONS")
      }
      // OPTIONS without an Origin asks what the endpoint takes; anonymous, it learns nothing.
      const options = yield* Effect.promise(() => fetch(mcpUrl, { method: "OPTIONS", headers: auth }))
      assert.strictEqual(options.status, 204)
      assert.strictEqual(options.headers.get("allow"), "POST, OPTIONS")
      assert.strictEqual((yield* Effect.promise(() => fetch(mcpUrl, { method: "PUT" }))).status, 401)

      const badVersion = yield* post(mcpUrl, list, { ...auth, "mcp-protocol-version": "1999-01-01" })
      assert.strictEqual(badVersion.status, 400)
      assert.include(badVersion.json.error.message, "Unsupported protocol version")
      const goodVersion = yield* post(mcpUrl, list, { ...auth, ...v })
      assert.strictEqual(goodVersion.status, 200)
    })
  )

  it.effect("scopes: read tokens describe but get 403 insufficient_scope on mutate, with a step-up scope", () =>
    Effect.gen(function* () {
      const { base, mcpUrl, token } = yield* StackTag
      const readOnly = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" }, { scope: "cairn:read" })}`, ...v }
      const described = yield* post(mcpUrl, call("describe", { browse: { kinds: ["entity"] } }), readOnly)
      assert.strictEqual(described.status, 200)
      assert.isUndefined(described.json.result.isError)

      const mutate = call("mutate", {
        operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
        input: { name: "x" },
        invocationId: "01890a5d-ac96-774b-bcce-b302099a8057"
      })
      const refused = yield* post(mcpUrl, mutate, readOnly)
      assert.strictEqual(refused.status, 403)
      assert.strictEqual(
        refused.headers.get("www-authenticate"),
        `Bearer realm="cairn", error="insufficient_scope", error_description="This call needs the cairn:write scope, which the access token does not carry. Ask the authorization server for a token with cairn:write.", scope="cairn:read cairn:write", resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`
      )

      const writeOnly = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" }, { scope: "cairn:write" })}`, ...v }
      const cannotRead = yield* post(mcpUrl, call("query", { query: {} }), writeOnly)
      assert.strictEqual(cannotRead.status, 403)
      assert.include(cannotRead.headers.get("www-authenticate")!, 'scope="cairn:read cairn:write"')
      // Listing tools needs no particular scope.
      const listed = yield* post(mcpUrl, list, writeOnly)
      assert.strictEqual(listed.status, 200)
    })
  )

  it.effect("a refused call gets the same 403 on every way through the endpoint (own fiber, pooled lane, SDK transport)", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const readOnly = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" }, { scope: "cairn:read" })}`, ...v }
      const mutate = call("mutate", {
        operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
        input: { name: "x" },
        invocationId: "01890a5d-ac96-774b-bcce-b302099a8058"
      })
      const plain = yield* post(mcpUrl, mutate, readOnly)
      // `_meta` makes the call one the plain recognizer leaves to the SDK's schemas: a pooled server answers it.
      const pooled = yield* post(mcpUrl, { ...mutate, params: { ...mutate.params, _meta: { progressToken: 1 } } }, readOnly)
      // A batch goes through the SDK's own transport.
      const batched = yield* post(mcpUrl, [mutate], readOnly)
      assert.strictEqual(plain.status, 403)
      for (const answer of [pooled, batched]) {
        assert.strictEqual(answer.status, plain.status)
        assert.strictEqual(answer.headers.get("www-authenticate"), plain.headers.get("www-authenticate"))
        assert.deepStrictEqual({ ...answer.json, requestId: undefined }, { ...plain.json, requestId: undefined })
        assert.notInclude(JSON.stringify(answer.json), "cairn.refusal")
      }
    })
  )

  it.effect("public errors are tool results with {code, message, recovery}; protocol errors stay JSON-RPC errors", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const auth = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" })}`, ...v }

      const extra = yield* post(mcpUrl, call("describe", { browse: { kinds: ["entity"] }, bogus: true }), auth)
      const result = extra.json.result
      assert.isTrue(result.isError)
      assert.strictEqual(result.structuredContent.code, "invalid_query")
      assert.strictEqual(result.structuredContent.recovery, "Correct the document; do not repeat it unchanged.")
      assert.deepStrictEqual(result.structuredContent.issues.map((i: { path: string }) => i.path), ["/bogus"])
      assert.include(result.content[0].text, "invalid_query: ")

      const unknown = yield* post(mcpUrl, call("describe", { inspect: [{ kind: "entity", name: "Nope" }] }), auth)
      assert.strictEqual(unknown.json.result.structuredContent.code, "inaccessible")

      const badEnvelope = yield* post(mcpUrl, call("mutate", { operation: { kind: "operation" }, invocationId: 7 }), auth)
      assert.strictEqual(badEnvelope.json.result.structuredContent.code, "invalid_input")
      assert.includeMembers(
        badEnvelope.json.result.structuredContent.issues.map((i: { path: string }) => i.path),
        ["/invocationId", "/operation/owner", "/operation/name"]
      )

      const badQuery = yield* post(mcpUrl, call("query", { query: { version: 2 } }), auth)
      assert.strictEqual(badQuery.json.result.structuredContent.code, "invalid_query")

      const noSuchTool = yield* post(mcpUrl, call("Task.create", {}), auth)
      assert.strictEqual(noSuchTool.status, 200)
      assert.strictEqual(noSuchTool.json.error.code, -32602)
      assert.include(noSuchTool.json.error.message, "exactly three tools")
    })
  )

  it.effect("a tool call is answered as one compact JSON body with its byte length, non-ASCII text included", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const auth = { authorization: `Bearer ${yield* token({ sub: "alice", org: "acme" })}`, ...v }
      for (const args of [{ search: "task" }, { inspect: [{ kind: "entity", name: "Tâche→✓" }] }]) {
        const response = yield* post(mcpUrl, call("describe", args), auth)
        assert.strictEqual(response.status, 200)
        assert.strictEqual(response.headers.get("content-type"), "application/json")
        assert.strictEqual(response.headers.get("content-length"), String(Buffer.byteLength(response.text)))
        assert.isNull(response.headers.get("transfer-encoding"))
        assert.strictEqual(response.text, JSON.stringify(response.json))
        if (response.json.result.isError !== true) {
          assert.deepStrictEqual(JSON.parse(response.json.result.content[0].text), response.json.result.structuredContent)
        } else {
          // The refusal names the definition: multi-byte characters, counted in bytes.
          assert.include(response.text, "Tâche→✓")
        }
      }
    })
  )

  it.effect("describe answers structured content and the same value as compact text", () =>
    Effect.gen(function* () {
      const { token, client } = yield* StackTag
      const c = yield* client(yield* token({ sub: "alice", org: "acme" }))
      const result = yield* Effect.promise(() => c.callTool({ name: "describe", arguments: { search: "task" } }))
      const structured = result.structuredContent as { catalogToken: string; cards: Array<{ ref: { name: string } }> }
      assert.isString(structured.catalogToken)
      assert.strictEqual(structured.cards[0]!.ref.name, "Task")
      assert.deepStrictEqual(JSON.parse((result.content as Array<{ text: string }>)[0]!.text), structured)
    }).pipe(Effect.scoped)
  )
})

describe("tools/list", () => {
  it.scopedLive("is exactly describe, query, mutate and byte-identical for tracker and a 500-entity catalog", () =>
    Effect.gen(function* () {
      const bodies: Array<string> = []
      for (const root of [undefined, synthetic(500)]) {
        const stack = yield* startStack(root ? { application: openApplication(root) } : {})
        const auth = { authorization: `Bearer ${yield* stack.token({ sub: "alice", org: "acme" })}`, ...v }
        const response = yield* post(stack.mcpUrl, list, auth)
        assert.strictEqual(response.status, 200)
        assert.deepStrictEqual(
          response.json.result.tools.map((t: { name: string }) => t.name),
          ["describe", "query", "mutate"]
        )
        for (const tool of response.json.result.tools) {
          assert.strictEqual(tool.inputSchema.type, "object")
          assert.isAbove(tool.description.length, 200)
        }
        bodies.push(JSON.stringify(response.json.result))
      }
      assert.strictEqual(bodies[0], bodies[1])
      const bytes = Buffer.byteLength(bodies[0]!)
      console.log(`tools/list: ${bytes} bytes (~${Math.round(bytes / 4)} tokens) for tracker and synthetic(500)`)
      assert.isAtMost(bytes, 6_000)
    })
  )
})

const op = (owner: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: owner }, name })

layer(StackLive, { timeout: 120_000, excludeTestServices: true })("the engine's answers through MCP", (it) => {
  it.effect("operation_rejected carries the public reason; the database follows the token's org", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const admin = { authorization: `Bearer ${yield* token({ sub: "carol", org: "initech", roles: ["admin"] })}`, ...v }
      const project = yield* post(mcpUrl, call("mutate", { operation: op("Project", "create"), input: { name: "Rejections" }, invocationId: uuidv7() }), admin)
      const projectId = project.json.result.structuredContent.output.id as string
      const task = yield* post(
        mcpUrl,
        call("mutate", { operation: op("Task", "create"), input: { projectId, title: "Once" }, invocationId: uuidv7() }),
        admin
      )
      const target = { kind: "entity", entity: "Task", id: task.json.result.structuredContent.output.id }
      const done = yield* post(mcpUrl, call("mutate", { operation: op("Task", "complete"), target, input: {}, invocationId: uuidv7() }), admin)
      assert.strictEqual(done.json.result.structuredContent.outcome, "committed")
      const again = yield* post(mcpUrl, call("mutate", { operation: op("Task", "complete"), target, input: {}, invocationId: uuidv7() }), admin)
      assert.isTrue(again.json.result.isError)
      assert.strictEqual(again.json.result.structuredContent.code, "operation_rejected")
      assert.strictEqual(again.json.result.structuredContent.message, "This task is already done.")
      assert.strictEqual(again.json.result.structuredContent.recovery, "Present the public reason to the user; do not retry blindly.")

      // Another org's admin sees its own, empty database.
      const other = { authorization: `Bearer ${yield* token({ sub: "carol", org: "umbrella", roles: ["admin"] })}`, ...v }
      const projects = { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } }
      const mine = yield* post(mcpUrl, call("query", { query: projects }), admin)
      assert.deepStrictEqual(mine.json.result.structuredContent.rows, [{ name: "Rejections" }])
      const theirs = yield* post(mcpUrl, call("query", { query: projects }), other)
      assert.deepStrictEqual(theirs.json.result.structuredContent.rows, [])
    })
  )

  it.effect("reused SDK servers: concurrent calls of two orgs each answer for their own caller", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const orgs = ["globex", "hooli"] as const
      const headers = Object.fromEntries(
        yield* Effect.forEach(orgs, (org) =>
          Effect.map(token({ sub: `admin-${org}`, org, roles: ["admin"] }), (t) => [org, { authorization: `Bearer ${t}`, ...v }] as const)
        )
      )
      for (const org of orgs) {
        const created = yield* post(mcpUrl, call("mutate", { operation: op("Project", "create"), input: { name: `Only ${org}` }, invocationId: uuidv7() }), headers[org]!)
        assert.strictEqual(created.json.result.structuredContent.outcome, "committed")
      }
      const projects = { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } }
      const calls = Array.from({ length: 40 }, (_, i) => orgs[i % 2]!)
      const answers = yield* Effect.forEach(calls, (org) => Effect.map(post(mcpUrl, call("query", { query: projects }), headers[org]!), (a) => [org, a] as const), {
        concurrency: "unbounded"
      })
      for (const [org, answer] of answers) assert.deepStrictEqual(answer.json.result.structuredContent.rows, [{ name: `Only ${org}` }])
    })
  )

  it.effect("inaccessible: a hidden field answers exactly as a nonexistent one", () =>
    Effect.gen(function* () {
      const { mcpUrl, token } = yield* StackTag
      const member = { authorization: `Bearer ${yield* token({ sub: "dave", org: "initech" })}`, ...v }
      const select = (field: string) =>
        call("query", { query: { version: 1, from: { kind: "entity", name: "Member" }, select: { x: { path: [field] } } } })
      const hidden = yield* post(mcpUrl, select("email"), member)
      const missing = yield* post(mcpUrl, select("nonexistent"), member)
      assert.strictEqual(hidden.json.result.structuredContent.code, "inaccessible")
      // Identical but for the name the caller chose.
      assert.strictEqual(hidden.text.replaceAll("email", "?"), missing.text.replaceAll("nonexistent", "?"))
    })
  )
})

/** An engine that answers one fixed way: only to observe how the transport maps it. */
const answering = (mutate: DataPlane["mutate"]) =>
  Layer.effect(
    DataPlane,
    Effect.gen(function* () {
      const catalog = yield* Effect.orDie(compile(tracker))
      const sealer = Layer.merge(Sealer.layer(Redacted.make("an-mcp-test-secret-0123456789abcdef")), DescribeLimits.layer())
      return DataPlane.make({
        describe: (_p, payload) => describeCatalog(View.full(catalog), payload as never).pipe(Effect.provide(sealer)),
        query: () => Effect.dieMessage("unused"),
        snapshot: () => Effect.dieMessage("unused"),
        changes: () => Stream.dieMessage("unused"),
        upload: () => Effect.dieMessage("unused"),
        download: () => Effect.dieMessage("unused"),
        link: () => Effect.dieMessage("unused"),
        resumable: () => Effect.dieMessage("unused"),
        linkPrincipal: () => Effect.dieMessage("unused"),
        here: { query: () => Effect.dieMessage("unused"), mutate: () => Effect.dieMessage("unused"), snapshot: () => Effect.dieMessage("unused") },
        mutate
      })
    })
  )

describe("transport mapping of failures that are not public errors", () => {
  const mutateCall = call("mutate", { operation: op("Project", "create"), input: { name: "x" }, invocationId: uuidv7() })

  it.scopedLive("Overloaded is a JSON-RPC error with retryAfterSeconds, not a tool result", () =>
    Effect.gen(function* () {
      const stack = yield* startStack({
        plane: answering(() => Effect.fail(new Overloaded({ message: "The writer is busy; retry shortly.", retryAfterSeconds: 2 })))
      })
      const auth = { authorization: `Bearer ${yield* stack.token({ sub: "alice", org: "acme" })}`, ...v }
      const response = yield* post(stack.mcpUrl, mutateCall, auth)
      assert.strictEqual(response.status, 200)
      assert.isUndefined(response.json.result)
      assert.deepStrictEqual(response.json.error, { code: -32005, message: "The writer is busy; retry shortly.", data: { retryAfterSeconds: 2 } })
    })
  )

  it.scopedLive("a defect is a generic JSON-RPC error naming the request id, revealing nothing", () =>
    Effect.gen(function* () {
      const stack = yield* startStack({ plane: answering(() => Effect.dieMessage("SQLITE_CORRUPT at /var/data/0f3a.sqlite")) })
      const auth = { authorization: `Bearer ${yield* stack.token({ sub: "alice", org: "acme" })}`, ...v }
      const response = yield* post(stack.mcpUrl, mutateCall, auth)
      const requestId = response.headers.get("x-request-id")!
      assert.isString(requestId)
      assert.strictEqual(response.json.error.code, -32603)
      assert.strictEqual(
        response.json.error.message,
        `The server failed while handling this request; it was logged as ${requestId}. Retry later, or report that reference.`
      )
      assert.notInclude(response.text, "SQLITE")
      assert.notInclude(response.text, "sqlite")
    })
  )
})

// One engine, three ways in: the same request gives the same public answer on `/db/rpc`,
// `/mcp` and `/db/sync`, through the server exactly as `npm start` assembles it. A token's
// scope is enforced by the engine on every transport; an unavailable database, an
// incompatible catalog and a handler defect answer without internal ids, SQL, paths or
// catalog diffs; oversized and deeply nested filters, and text that is not well-formed
// Unicode, are public errors everywhere; and
// every path under `/db/*` needs a token.
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Entity, Operation, RootSchema } from "@cairn/catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"
import { databaseId } from "@cairn/store/Databases"
import { Effect, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type Running, startApp } from "./support/app.js"
import { type Answer, mcp, RawJson, rpc, sync } from "@cairn/testkit/Wire"
import { entity, projects } from "./support/requests.js"

const operation = (owner: string, name: string) => ({ kind: "operation", owner: entity(owner), name })

/** Text that must never reach a caller. */
const internals = (app: Running, answer: Answer, keys: ReadonlyArray<string> = []) => {
  const text = answer.text
  for (const word of ["sqlite", "SQLITE", "ActivationError", "Error:", "    at ", app.dataDir, "SELECT ", "databases/", ...keys]) {
    assert.notInclude(text, word, `answer leaks ${JSON.stringify(word)}: ${text.slice(0, 300)}`)
  }
  for (const key of keys) assert.notInclude(text, databaseId(DatabaseKey.make(key)))
}

/** One plain HTTP request under `/db/objects` (the file verbs' way in). */
const files = (app: Running, token: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${app.base}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...headers }, ...(body !== undefined ? { body } : {}) })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })
const someObject = "0192f000-0000-7000-8000-000000000001"

/** The three transports' public answers for one request must be identical. */
const sameAnswer = (label: string, answers: ReadonlyArray<Answer>) => {
  for (const answer of answers) {
    assert.strictEqual(answer.status, 200, `${label}: ${answer.text.slice(0, 200)}`)
    assert.isDefined(answer.error, `${label}: expected a public error, got ${answer.text.slice(0, 200)}`)
  }
  for (const answer of answers.slice(1)) assert.deepStrictEqual(answer.error, answers[0]!.error, label)
}

const nestedNot = (depth: number) => {
  let filter: unknown = { op: "eq", path: ["name"], value: "x" }
  for (let i = 0; i < depth; i++) filter = { op: "not", filter }
  return filter
}
const wideIn = (n: number) => ({ op: "in", path: ["name"], value: Array.from({ length: n }, (_, i) => `v${i}`) })
const wideOr = (n: number) => ({ op: "or", filters: Array.from({ length: n }, (_, i) => ({ op: "eq", path: ["name"], value: `v${i}` })) })

describe("transport conformance through the real App", () => {
  it.scopedLive("the same request gives the same public answer on RPC and MCP, and on sync where the verb exists", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const both = (tag: "Describe" | "Query" | "Mutate", payload: unknown) =>
        Effect.all([rpc(app, db, tag, payload), mcp(app, agent, tag.toLowerCase(), payload)])

      const cases: ReadonlyArray<readonly [string, "Describe" | "Query" | "Mutate", unknown]> = [
        ["malformed describe", "Describe", { browse: { kinds: ["entity"] }, everything: true }],
        ["unknown definition", "Describe", { inspect: [entity("Nope")] }],
        ["malformed query", "Query", { query: { version: 2, from: entity("Task"), select: {} } }],
        ["unknown entity", "Query", { query: { version: 1, from: entity("Nope"), select: { x: { path: ["x"] } } } }],
        ["stale ifCatalog on query", "Query", { ifCatalog: "stale", query: projects }],
        ["page too large", "Query", { query: { ...projects, page: { first: 100_000 } } }],
        ["hidden field", "Query", { query: { version: 1, from: entity("Member"), select: { e: { path: ["email"] } } } }],
        ["bad invocation id", "Mutate", { operation: operation("Project", "create"), input: { name: "x" }, invocationId: "not-a-uuid" }],
        ["unknown operation", "Mutate", { operation: operation("Project", "explode"), input: {}, invocationId: uuidv7() }],
        ["invalid input", "Mutate", { operation: operation("Project", "create"), input: { name: 7 }, invocationId: uuidv7() }],
        ["missing target", "Mutate", { operation: operation("Task", "rename"), target: { kind: "entity", entity: "Task", id: "nope" }, input: { title: "t" }, invocationId: uuidv7() }],
        ["stale ifCatalog on mutate", "Mutate", { ifCatalog: "stale", operation: operation("Project", "create"), input: { name: "x" }, invocationId: uuidv7() }]
      ]
      for (const [label, tag, payload] of cases) {
        const answers = yield* both(tag, payload)
        sameAnswer(label, answers)
        // One sentence, one full stop (an issue written as a sentence read "…this one intent..").
        assert.notMatch(answers[0]!.error!.message, /[^.]\.\.$|\.\.\s/, label)
      }

      // Sync has its own verbs, but the engine's shared steps answer the same words.
      const stale = yield* sync(app, db, "SyncSnapshot", { ifCatalog: "stale", scope: { entities: [{ from: entity("Project") }] } })
      const [staleQuery] = yield* both("Query", { ifCatalog: "stale", query: projects })
      sameAnswer("stale ifCatalog on snapshot", [staleQuery!, stale])
    })
  )

  it.scopedLive("text with an unpaired surrogate is refused on every transport; astral text round-trips identically", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const scope = { entities: [{ from: entity("Project") }] }
      // Stored as UTF-8, a lone surrogate read back as three U+FFFD while the change feed kept
      // the escape: a snapshot and the changes disagreed on the same record.
      const create = (name: string) =>
        new RawJson(`{"operation":${JSON.stringify(operation("Project", "create"))},"input":{"name":"${name}"},"invocationId":"${uuidv7()}"}`)
      const lone = "a\\ud800b"
      const mutations = [yield* rpc(app, db, "Mutate", create(lone)), yield* mcp(app, agent, "mutate", create(lone))]
      sameAnswer("lone surrogate in input", mutations)
      assert.strictEqual(mutations[0]!.error!.code, "invalid_input")
      assert.include(mutations[0]!.error!.message, "well-formed Unicode")
      const where = new RawJson(`{"query":{"version":1,"from":{"kind":"entity","name":"Project"},"select":{"n":{"path":["name"]}},"where":{"op":"eq","path":["name"],"value":"\\udc00"}}}`)
      const reads = [
        yield* rpc(app, db, "Query", where),
        yield* mcp(app, agent, "query", where),
        yield* sync(app, db, "SyncSnapshot", new RawJson(`{"scope":{"entities":[{"from":{"kind":"entity","name":"Pro\\udfffject"}}]}}`))
      ]
      sameAnswer("lone surrogate in a read", reads)
      assert.strictEqual(reads[0]!.error!.code, "invalid_query")

      // Paired surrogates are ordinary text: the same on the receipt's read, the snapshot and the change feed.
      const start = yield* sync(app, db, "SyncSnapshot", { scope })
      const cursor = (start.value as { checkpoint: { cursor: string } }).checkpoint.cursor
      const astral = "\\ud83d\\ude00 launch"
      const created = yield* rpc(app, db, "Mutate", create(astral))
      assert.isUndefined(created.error, created.text)
      const queried = yield* rpc(app, db, "Query", { query: projects })
      assert.deepStrictEqual((queried.value as { rows: ReadonlyArray<unknown> }).rows, [{ name: "😀 launch" }])
      const snapshot = yield* sync(app, db, "SyncSnapshot", { scope })
      assert.strictEqual((snapshot.value as { records: ReadonlyArray<{ record: { name: string } }> }).records[0]!.record.name, "😀 launch")
      const changes = yield* sync(app, db, "SyncChanges", { scope, cursor, live: false })
      assert.include(JSON.parse(changes.text.split("\n")[0]!).values[0].changes.map((c: { record: { name: string } }) => c.record.name), "😀 launch")
    })
  )

  it.scopedLive("a filter value of the wrong type is described, not echoed, on every transport", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const long = "v".repeat(60_000)
      for (const [label, value, described] of [
        ["a long string on an integer field", JSON.stringify(long), "a string of 60000 characters"],
        ["a number beyond double range (JSON.parse reads Infinity)", "1e400", "a number"]
      ] as const) {
        const filter = `{"op":"eq","path":["priority"],"value":${value}}`
        const query = new RawJson(`{"query":{"version":1,"from":{"kind":"entity","name":"Task"},"select":{"t":{"path":["title"]}},"where":${filter}}}`)
        const answers = [yield* rpc(app, db, "Query", query), yield* mcp(app, agent, "query", query)]
        sameAnswer(label, answers)
        const snapshot = yield* sync(app, db, "SyncSnapshot", new RawJson(`{"scope":{"entities":[{"from":{"kind":"entity","name":"Task"},"where":${filter}}]}}`))
        for (const answer of [...answers, snapshot]) {
          assert.strictEqual(answer.error?.code, "invalid_query", answer.text.slice(0, 300))
          assert.include(answer.text, `${described} is not a valid value for`, label)
          assert.notInclude(answer.text, "vvvvvvvvvv", label)
          assert.notInclude(answer.text, "null is not", label)
          assert.isBelow(answer.text.length, 2_000, label)
        }
      }
    })
  )

  it.scopedLive("a read-scoped token cannot mutate on any transport; a write-only token cannot read", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const reader = yield* app.token({ sub: "alice", org: "acme", scope: "cairn:read" })
      const agentReader = yield* app.token({ sub: "alice", org: "acme", scope: "cairn:read", resource: "mcp" })
      const create = { operation: operation("Project", "create"), input: { name: "Sneaky" }, invocationId: uuidv7() }

      const viaRpc = yield* rpc(app, reader, "Mutate", create)
      const viaMcp = yield* mcp(app, agentReader, "mutate", { ...create, invocationId: uuidv7() })
      // Files too: a direct upload and a resumable one.
      const upload = (path: string, headers: Record<string, string>) =>
        Effect.promise(async () => {
          const response = await fetch(`${app.base}${path}`, { method: "POST", headers: { authorization: `Bearer ${reader}`, ...headers }, body: "hello" })
          return { status: response.status, headers: response.headers, text: await response.text() }
        })
      const viaUpload = yield* upload("/db/objects", { "content-type": "text/plain" })
      const viaResumable = yield* upload("/db/objects/resumable", { "tus-resumable": "1.0.0", "upload-length": "5" })
      for (const refused of [viaRpc, viaMcp, viaUpload, viaResumable]) {
        assert.strictEqual(refused.status, 403, refused.text)
        assert.match(refused.headers.get("www-authenticate") ?? "", /^Bearer realm="cairn", error="insufficient_scope", error_description="[^"]+", scope="cairn:read cairn:write"/)
        // One sentence on every way in, with the step up.
        assert.include(refused.headers.get("www-authenticate") ?? "", "Ask the authorization server for a token with cairn:write.")
      }
      for (const refused of [viaRpc, viaMcp, viaUpload]) assert.strictEqual(JSON.parse(refused.text).error, "insufficient_scope")
      // Nothing was committed: an admin of acme sees no project.
      const admin = yield* app.token({ sub: "root", org: "acme", roles: ["admin"] })
      const seen = yield* rpc(app, admin, "Query", { query: projects })
      assert.deepStrictEqual((seen.value as { rows: ReadonlyArray<unknown> }).rows, [])

      const writer = yield* app.token({ sub: "alice", org: "acme", scope: "cairn:write" })
      const agentWriter = yield* app.token({ sub: "alice", org: "acme", scope: "cairn:write", resource: "mcp" })
      const reads = [
        yield* rpc(app, writer, "Query", { query: projects }),
        yield* rpc(app, writer, "Describe", { browse: { kinds: ["entity"] } }),
        yield* mcp(app, agentWriter, "query", { query: projects }),
        yield* sync(app, writer, "SyncSnapshot", { scope: { entities: [{ from: entity("Project") }] } }),
        yield* sync(app, writer, "SyncChanges", { scope: { entities: [{ from: entity("Project") }] }, cursor: "x" }),
        // The file verbs: a download and a signed link need cairn:read too.
        yield* files(app, writer, "GET", `/db/objects/${someObject}`),
        yield* files(app, writer, "POST", `/db/objects/${someObject}/link`)
      ]
      for (const refused of reads) {
        assert.strictEqual(refused.status, 403, refused.text)
        assert.include(refused.headers.get("www-authenticate") ?? "", 'error="insufficient_scope"')
      }
      // A token without any scope claim is refused everywhere too.
      const scopeless = yield* app.token({ sub: "alice", org: "acme", scope: "" })
      assert.strictEqual((yield* rpc(app, scopeless, "Describe", { browse: { kinds: ["entity"] } })).status, 403)
    })
  )

  it.scopedLive("a database that cannot be opened is 503 with a request id on every transport, naming nothing internal", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      // The org's file is not a database: activation fails inside the store.
      mkdirSync(join(app.dataDir, "databases"), { recursive: true })
      writeFileSync(join(app.dataDir, "databases", `${databaseId(DatabaseKey.make("broken"))}.sqlite`), Buffer.alloc(8192, 0x5a))
      const db = yield* app.token({ sub: "alice", org: "broken" })
      const agent = yield* app.token({ sub: "alice", org: "broken", resource: "mcp" })
      const scope = { entities: [{ from: entity("Project") }] }
      const answers = [
        yield* rpc(app, db, "Query", { query: projects }),
        yield* rpc(app, db, "Mutate", { operation: operation("Project", "create"), input: { name: "x" }, invocationId: uuidv7() }),
        yield* mcp(app, agent, "query", { query: projects }),
        yield* sync(app, db, "SyncSnapshot", { scope }),
        yield* sync(app, db, "SyncChanges", { scope, cursor: "x" }),
        // The file verbs answer the same: upload, download, link and a resumable upload.
        yield* files(app, db, "POST", "/db/objects", { "content-type": "text/plain" }, "hello"),
        yield* files(app, db, "GET", `/db/objects/${someObject}`),
        yield* files(app, db, "POST", `/db/objects/${someObject}/link`),
        yield* files(app, db, "POST", "/db/objects/resumable", { "tus-resumable": "1.0.0", "upload-length": "5" })
      ]
      for (const answer of answers) {
        assert.strictEqual(answer.status, 503, answer.text)
        const body = JSON.parse(answer.text)
        assert.strictEqual(body.error, "unavailable")
        assert.strictEqual(body.requestId, answer.headers.get("x-request-id"))
        assert.include(body.message, body.requestId)
        internals(app, answer, ["broken"])
      }
      // Every other tenant keeps working.
      const other = yield* rpc(app, yield* app.token({ sub: "bob", org: "fine" }), "Query", { query: projects })
      assert.strictEqual(other.status, 200)
      assert.isDefined(other.value)
    })
  )

  it.scopedLive("a 3,000-deep or 60,000-wide filter is a public error on every transport", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      for (const [label, where] of [
        ["3,000-deep not", nestedNot(3000)],
        ["60,000-value in", wideIn(60_000)],
        ["20,000-term or", wideOr(20_000)]
      ] as const) {
        const scope = { entities: [{ from: entity("Project"), where }] }
        const answers = [
          yield* rpc(app, db, "Query", { query: { ...projects, where } }),
          yield* mcp(app, agent, "query", { query: { ...projects, where } }),
          yield* sync(app, db, "SyncSnapshot", { scope }),
          yield* sync(app, db, "SyncChanges", { scope, cursor: "x" })
        ]
        for (const answer of answers) {
          assert.strictEqual(answer.status, 200, `${label}: ${answer.text.slice(0, 200)}`)
          assert.oneOf(answer.error?.code, ["query_budget_exceeded", "invalid_query"], `${label}: ${answer.text.slice(0, 300)}`)
          assert.isBelow(answer.text.length, 8_192, label)
          internals(app, answer)
        }
      }
      // The server is still healthy.
      const health = yield* Effect.promise(() => fetch(`${app.base}/health`).then((r) => r.status))
      assert.strictEqual(health, 200)
    })
  )

  it.scopedLive("hostile shapes (10,000-deep nesting, huge arrays and keys, __proto__) are public errors everywhere; MCP arguments must be an object", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const deep = `${"[".repeat(10_000)}1${"]".repeat(10_000)}`
      const manyKeys = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))
      const proto = JSON.parse('{"browse":{"kinds":["entity"]},"__proto__":{"polluted":true}}')
      for (const [label, payload] of [
        ["deep", new RawJson(`{"browse":${deep}}`)],
        ["wide", { browse: { kinds: Array.from({ length: 450_000 }, () => 0) } }],
        ["keys", { browse: manyKeys }],
        ["proto", proto],
        // Effect's union decoding reads a discriminator with String(v), which throws for this object.
        ["toString", { inspect: [{ kind: { toString: 0 }, name: "Task" }], entities: [{ from: { kind: { valueOf: 1, toString: 0 } } }] }]
      ] as const) {
        const answers = [
          yield* rpc(app, db, "Describe", payload),
          // The MCP SDK re-reads arguments into fresh objects, which drops a "__proto__" key before the engine sees it.
          ...(label === "proto" ? [] : [yield* mcp(app, agent, "describe", payload)]),
          yield* rpc(app, db, "Mutate", new RawJson(`{"operation":${JSON.stringify(operation("Project", "create"))},"invocationId":"${uuidv7()}","input":${payload instanceof RawJson ? payload.text : JSON.stringify(payload)}}`)),
          yield* sync(app, db, "SyncSnapshot", new RawJson(`{"scope":${payload instanceof RawJson ? payload.text : JSON.stringify(payload)}}`))
        ]
        for (const answer of answers) {
          assert.strictEqual(answer.status, 200, `${label}: ${answer.text.slice(0, 200)}`)
          assert.oneOf(answer.error?.code, ["invalid_query", "invalid_input"], `${label}: ${answer.text.slice(0, 300)}`)
          assert.isBelow(answer.text.length, 4_096, label)
          internals(app, answer)
        }
      }
      assert.isUndefined(({} as Record<string, unknown>)["polluted"])
      for (const args of ["x", [1], null, 5]) {
        const response = yield* Effect.promise(() =>
          fetch(`${app.base}/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${agent}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "describe", arguments: args } })
          }).then((r) => r.json())
        )
        assert.deepStrictEqual(response.error.code, -32602, JSON.stringify(response))
        assert.strictEqual(response.id, 7)
      }
    })
  )

  it.scopedLive("a body that is not one RPC envelope is a plain 400 on /db/rpc and /db/sync, echoing no parser error", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const request = (payload: unknown) => ({ _tag: "Request", id: "1", tag: "Describe", payload, headers: [] })
      const snapshotScope = { scope: { entities: [{ from: entity("Project") }] } }
      const bodies: ReadonlyArray<readonly [string, string, string]> = [
        ["/db/rpc", "application/json", "garbage"],
        ["/db/rpc", "application/json", "null"],
        ["/db/rpc", "application/json", "[]"],
        ["/db/rpc", "application/json", JSON.stringify({ ...request({}), headers: { a: "b" } })],
        ["/db/rpc", "application/json", JSON.stringify({ ...request({}), id: "one" })],
        ["/db/rpc", "application/json", JSON.stringify({ _tag: "Nope" })],
        ["/db/sync", "application/ndjson", "garbage"],
        ["/db/sync", "application/ndjson", "garbage\n"],
        ["/db/sync", "application/ndjson", JSON.stringify({ ...request({}), tag: "SyncSnapshot" })],
        // One call per HTTP request, as on /db/rpc: a body of many lines would run every one of them
        // (5,000 snapshots in one 700 KB body held the event loop for ~4 s).
        ["/db/sync", "application/ndjson", `${JSON.stringify({ ...request(snapshotScope), tag: "SyncSnapshot" })}\n`.repeat(2)],
        ["/db/sync", "application/ndjson", `${JSON.stringify({ ...request(snapshotScope), tag: "SyncSnapshot" })}\n`.repeat(1_000)]
      ]
      for (const [path, type, body] of bodies) {
        const response = yield* Effect.promise(() =>
          fetch(`${app.base}${path}`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": type }, body })
        )
        const text = yield* Effect.promise(() => response.text())
        assert.strictEqual(response.status, 400, `${path} ${body}: ${text}`)
        const answer = JSON.parse(text)
        assert.strictEqual(answer.error, "invalid_request")
        assert.include(answer.message, '"_tag":"Request"')
        for (const word of ["SyntaxError", "TypeError", "Unexpected token", "garbage"]) assert.notInclude(text, word)
      }
    })
  )

  it.scopedLive("a body over the limit is the same 413 on /db/rpc, /db/sync and /mcp, declared or streamed", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_MAX_BODY_BYTES: "4096" } })
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const search = "x".repeat(8_000)
      const ways: ReadonlyArray<readonly [string, string, Record<string, string>, string]> = [
        ["/db/rpc", db, { "content-type": "application/json" }, JSON.stringify({ _tag: "Request", id: "1", tag: "Describe", payload: { search }, headers: [] })],
        ["/db/sync", db, { "content-type": "application/ndjson" }, `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncSnapshot", payload: { search }, headers: [] })}\n`],
        [
          "/mcp",
          agent,
          { "content-type": "application/json", accept: "application/json, text/event-stream" },
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "describe", arguments: { search } } })
        ]
      ]
      for (const [path, token, headers, body] of ways) {
        for (const streamed of [false, true]) {
          // A stream body goes out chunked, without a Content-Length: the limit is met while reading.
          const sent = streamed
            ? new ReadableStream<Uint8Array>({
                start(controller) {
                  const bytes = new TextEncoder().encode(body)
                  for (let at = 0; at < bytes.length; at += 1024) controller.enqueue(bytes.slice(at, at + 1024))
                  controller.close()
                }
              })
            : body
          const response = yield* Effect.promise(() =>
            fetch(`${app.base}${path}`, { method: "POST", headers: { authorization: `Bearer ${token}`, ...headers }, body: sent, duplex: "half" } as RequestInit)
          )
          const text = yield* Effect.promise(() => response.text())
          assert.strictEqual(response.status, 413, `${path} streamed=${streamed}: ${text}`)
          const answer = JSON.parse(text)
          assert.strictEqual(answer.error, "payload_too_large", text)
          assert.strictEqual(answer.limitBytes, 4096)
          assert.strictEqual(answer.requestId, response.headers.get("x-request-id"))
        }
      }
    })
  )

  it.scopedLive("every path under /db/* needs a token; then an unknown path is a plain 404, a known one's other methods 405 with Allow", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const send = (method: string, path: string, headers: Record<string, string> = {}) =>
        Effect.promise(() => fetch(`${app.base}${path}`, { method, headers }))
      const cases: ReadonlyArray<readonly [string, string, number, string | null]> = [
        ["POST", "/db/anything", 404, null],
        ["DELETE", "/db/sync/x", 404, null],
        ["GET", "/db/", 404, null],
        ["PUT", "/db", 404, null],
        ["GET", "/db/rpc", 405, "POST, OPTIONS"],
        ["HEAD", "/db/rpc", 405, "POST, OPTIONS"],
        ["DELETE", "/db/rpc", 405, "POST, OPTIONS"],
        ["GET", "/db/sync", 405, "POST, OPTIONS"],
        ["GET", "/db/objects", 405, "POST, OPTIONS"],
        ["DELETE", "/db/objects/0192f000-0000-7000-8000-000000000001", 405, "GET, HEAD, OPTIONS"],
        ["GET", "/db/objects/0192f000-0000-7000-8000-000000000001/link", 405, "POST, OPTIONS"],
        // OPTIONS without an Origin is a client asking, not a browser's preflight.
        ["OPTIONS", "/db/rpc", 204, "POST, OPTIONS"],
        ["OPTIONS", "/db/objects/0192f000-0000-7000-8000-000000000001", 204, "GET, HEAD, OPTIONS"]
      ]
      for (const [method, path, status, allow] of cases) {
        const anonymous = yield* send(method, path)
        assert.strictEqual(anonymous.status, 401, `${method} ${path}`)
        assert.strictEqual(anonymous.headers.get("www-authenticate"), 'Bearer realm="cairn"')
        const known = yield* send(method, path, { authorization: `Bearer ${token}` })
        assert.strictEqual(known.status, status, `${method} ${path}`)
        assert.strictEqual(known.headers.get("allow"), allow, `${method} ${path}`)
        if (status !== 204 && method !== "HEAD") {
          const answer = yield* Effect.promise(() => known.json())
          assert.strictEqual(answer.error, status === 404 ? "not_found" : "method_not_allowed", `${method} ${path}`)
          if (status === 405) assert.include(answer.message, `not ${method}`)
        }
      }
      // A resumable upload's OPTIONS (no Origin) is TUS's own capability answer, for a caller with a token.
      const tus = yield* send("OPTIONS", "/db/objects/resumable", { authorization: `Bearer ${token}` })
      assert.strictEqual(tus.status, 204)
      assert.strictEqual(tus.headers.get("tus-version"), "1.0.0")
      // Outside /db: the probes take GET (and HEAD) only.
      for (const path of ["/health", "/ready"]) {
        const post = yield* send("POST", path)
        assert.strictEqual(post.status, 405, path)
        assert.strictEqual(post.headers.get("allow"), "GET, HEAD, OPTIONS")
        assert.strictEqual((yield* send("HEAD", path)).status, 200, path)
      }
    })
  )
})

// A small application of the test's own, for what the tracker cannot show: a handler
// defect, and a catalog that does not fit the data already stored.
const Note = Entity.make("Note", { description: "A note.", fields: { text: Schema.String } })
const NoteCreate = Operation.make({
  owner: Note,
  name: "create",
  description: "Create a note.",
  targeted: false,
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ id: Schema.String })
})
const NoteExplode = Operation.make({
  owner: Note,
  name: "explode",
  description: "Fails inside the server.",
  targeted: false,
  input: Schema.Struct({}),
  output: Schema.Struct({})
})
const NoteSlow = Operation.make({
  owner: Note,
  name: "slow",
  description: "Holds the writer for a moment, then creates a note.",
  targeted: false,
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ id: Schema.String })
})
const notes = RootSchema.make("notes", { entities: [Note], operations: [NoteCreate, NoteExplode, NoteSlow] })
const notesDeployment = {
  root: notes,
  policy: Policy.make({
    entities: [Policy.entity(Note, { read: Rule.always })],
    operations: [Policy.operation(NoteCreate), Policy.operation(NoteExplode), Policy.operation(NoteSlow)]
  }),
  handlers: Handlers.make(
    { entities: [Note], operations: [NoteCreate, NoteExplode, NoteSlow] },
    {
      "Note.create": ({ input, tx }) => Effect.map(tx.insert("Note", { text: input.text }), (id) => ({ id })),
      "Note.explode": () => Effect.die(new Error("SQLITE_CORRUPT: SELECT * FROM note_7f3a in /var/lib/cairn/databases/0f3a.sqlite")),
      // A handler is an Effect; this one sleeps, so invocations queue up behind it.
      // The writer is held by the test's group pause (a handler itself may not wait: its transaction
      // never spans a yield to the event loop).
      "Note.slow": ({ input, tx }) => Effect.map(tx.insert("Note", { text: input.text }), (id) => ({ id }))
    }
  ),
  databases: [{ name: "notebooks", schema: "notes", keyClaim: "org" }]
}

/** The same application, but `text` now a number: stored rows would be reinterpreted. */
const NoteV2 = Entity.make("Note", { description: "A note.", fields: { text: Schema.Number } })
const NoteCreateV2 = Operation.make({ ...NoteCreate, owner: NoteV2, input: Schema.Struct({ text: Schema.Number }) })
const NoteExplodeV2 = Operation.make({ ...NoteExplode, owner: NoteV2 })
const NoteSlowV2 = Operation.make({ ...NoteSlow, owner: NoteV2, input: Schema.Struct({ text: Schema.Number }) })
const notesV2 = RootSchema.make("notes", { entities: [NoteV2], operations: [NoteCreateV2, NoteExplodeV2, NoteSlowV2] })
const notesV2Deployment = {
  ...notesDeployment,
  root: notesV2,
  policy: Policy.make({
    entities: [Policy.entity(NoteV2, { read: Rule.always })],
    operations: [Policy.operation(NoteCreateV2), Policy.operation(NoteExplodeV2), Policy.operation(NoteSlowV2)]
  }),
  handlers: Handlers.make(
    { entities: [NoteV2], operations: [NoteCreateV2, NoteExplodeV2, NoteSlowV2] },
    {
      "Note.create": ({ input, tx }) => Effect.map(tx.insert("Note", { text: input.text }), (id) => ({ id })),
      "Note.explode": () => Effect.die(new Error("unused")),
      "Note.slow": () => Effect.die(new Error("unused"))
    }
  )
}
const allNotes = { version: 1, from: entity("Note"), select: { text: { path: ["text"] } } }

describe("failures inside the server, on every transport", () => {
  it.scopedLive("a handler defect is answered by request id on RPC and MCP, rolled back, with nothing internal", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ deployment: notesDeployment })
      const db = yield* app.token({ sub: "alice", org: "acme" })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const explode = { operation: operation("Note", "explode"), input: {}, invocationId: uuidv7() }
      const viaRpc = yield* rpc(app, db, "Mutate", explode)
      assert.strictEqual(viaRpc.status, 200)
      assert.include(viaRpc.text, `"Die"`)
      assert.include(viaRpc.text, "reference")
      internals(app, viaRpc)
      const viaMcp = yield* mcp(app, agent, "mutate", { ...explode, invocationId: uuidv7() })
      assert.strictEqual(viaMcp.status, 200)
      assert.strictEqual(JSON.parse(viaMcp.text).error.code, -32603)
      internals(app, viaMcp)
      // The engine still serves the same database.
      const created = yield* rpc(app, db, "Mutate", { operation: operation("Note", "create"), input: { text: "fine" }, invocationId: uuidv7() })
      assert.strictEqual((created.value as { outcome: string }).outcome, "committed")
    })
  )

  it.scopedLive("an incompatible catalog over stored data answers 503 without the diff or the database id", () =>
    Effect.gen(function* () {
      const first = yield* startApp({ deployment: notesDeployment })
      const token = yield* first.token({ sub: "alice", org: "acme" })
      const created = yield* rpc(first, token, "Mutate", { operation: operation("Note", "create"), input: { text: "kept" }, invocationId: uuidv7() })
      assert.strictEqual((created.value as { outcome: string }).outcome, "committed")
      return first
    }).pipe(
      Effect.scoped,
      Effect.flatMap((first) =>
        Effect.gen(function* () {
          const app = yield* startApp({ deployment: notesV2Deployment, dataDir: first.dataDir })
          const db = yield* app.token({ sub: "alice", org: "acme" })
          const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
          const answers = [
            yield* rpc(app, db, "Query", { query: allNotes }),
            yield* mcp(app, agent, "query", { query: allNotes }),
            yield* sync(app, db, "SyncSnapshot", { scope: { entities: [{ from: entity("Note") }] } })
          ]
          for (const answer of answers) {
            assert.strictEqual(answer.status, 503, answer.text)
            assert.strictEqual(JSON.parse(answer.text).error, "unavailable")
            internals(app, answer, ["acme"])
            for (const word of ["text", "Number", "String", "representation", "catalog"]) assert.notInclude(answer.text, word)
          }
        })
      )
    )
  )

  it.scopedLive("a full writer queue is 503 + Retry-After with nothing applied; the retried invocation commits exactly once", () =>
    Effect.gen(function* () {
      // Every group holds the write connection for 300 ms before its transaction: invocations queue up behind it.
      const app = yield* startApp({
        deployment: notesDeployment,
        env: { CAIRN_WRITER_QUEUE_LIMIT: "2", CAIRN_GROUP_COMMIT_MAX_BATCH: "1" },
        writerPause: Effect.sleep("300 millis")
      })
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const ids = Array.from({ length: 12 }, () => uuidv7())
      const slow = (id: string, i: number) => rpc(app, token, "Mutate", { operation: operation("Note", "slow"), input: { text: `n${i}` }, invocationId: id })
      const first = yield* Effect.forEach(ids, slow, { concurrency: "unbounded" })
      const refused = first.flatMap((answer, i) => (answer.status === 503 ? [i] : []))
      assert.isAbove(refused.length, 0, "some invocations must find the queue full")
      for (const i of refused) {
        const answer = first[i]!
        assert.strictEqual(answer.headers.get("retry-after"), "1")
        const body = JSON.parse(answer.text)
        assert.strictEqual(body.error, "overloaded")
        assert.strictEqual(body.retryAfterSeconds, 1)
        assert.include(body.message, "same invocationId")
      }
      for (const [i, answer] of first.entries()) {
        if (answer.status !== 503) assert.strictEqual((answer.value as { outcome: string }).outcome, "committed", `invocation ${i}`)
      }
      // Nothing of a refused invocation was applied: only the accepted ones are stored.
      const count = (answer: Answer) => (answer.value as { rows: ReadonlyArray<{ text: string }> }).rows.map((r) => r.text).sort()
      const accepted = ids.flatMap((_, i) => (refused.includes(i) ? [] : [`n${i}`])).sort()
      assert.deepStrictEqual(count(yield* rpc(app, token, "Query", { query: { ...allNotes, page: { first: 50 } } })), accepted)
      // Retried one at a time with the same ids, each commits once; replaying an accepted one changes nothing.
      for (const i of refused) {
        const retried = yield* slow(ids[i]!, i)
        assert.strictEqual((retried.value as { outcome: string }).outcome, "committed")
      }
      const replay = yield* slow(ids[first.findIndex((a) => a.status === 200)]!, first.findIndex((a) => a.status === 200))
      assert.strictEqual((replay.value as { outcome: string }).outcome, "committed")
      assert.deepStrictEqual(
        count(yield* rpc(app, token, "Query", { query: { ...allNotes, page: { first: 50 } } })),
        ids.map((_, i) => `n${i}`).sort()
      )
    })
  )
})

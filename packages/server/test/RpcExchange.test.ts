// The one-request RPC exchange (`internal/rpcExchange`) against the @effect/rpc server it stands
// in for (`RpcServer.toHttpApp` over the same group, handlers, middleware and JSON serialization):
// for every body, the same status, content type and bytes. `RpcServer` is run with
// `disableFatalDefects` (a defect answers its request's exit, as the exchange answers it; Cairn's
// handlers turn defects into public errors before either sees one) and without tracing.
// Bodies are what the `/db` gate admits (`RpcEnvelope`): one message with a client `_tag`, or
// malformed JSON; the one known difference, outside that, is pinned below.
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Rpc, RpcGroup, RpcMiddleware, RpcSerialization, RpcServer } from "@effect/rpc"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import fc from "fast-check"
import * as RpcExchange from "../src/internal/rpcExchange.js"

class Denied extends Schema.TaggedError<Denied>()("Denied", { reason: Schema.String }) {}
class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { id: Schema.String }) {}

class User extends Context.Tag("test/User")<User, string>() {}

/** Provides the caller from the `x-user` header (HTTP headers and the message's own, merged), or refuses. */
class Auth extends RpcMiddleware.Tag<Auth>()("test/Auth", { provides: User, failure: Denied }) {}
/** Runs before the handler, failing on `x-block`; provides nothing. */
class Gate extends RpcMiddleware.Tag<Gate>()("test/Gate", { failure: Denied }) {}
/** Optional: its failure is ignored, its success provides nothing here. */
class Soft extends RpcMiddleware.Tag<Soft>()("test/Soft", { optional: true, failure: Denied }) {}

class Group extends RpcGroup.make(
  Rpc.make("Echo", { payload: { text: Schema.String, times: Schema.optional(Schema.Int) }, success: Schema.Struct({ text: Schema.String }) }),
  Rpc.make("Find", { payload: { id: Schema.String }, success: Schema.Struct({ id: Schema.String, at: Schema.DateFromString }), error: NotFound }),
  Rpc.make("Whoami", { success: Schema.String, error: Denied }).middleware(Auth).middleware(Gate).middleware(Soft),
  Rpc.make("Crash", { payload: { message: Schema.String } }),
  Rpc.make("BadOutput", { success: Schema.Struct({ n: Schema.Number }) })
) {}

const Handlers = Group.toLayer({
  Echo: ({ text, times }) => Effect.succeed({ text: text.repeat(times ?? 1) }),
  Find: ({ id }) => (id === "missing" ? Effect.fail(new NotFound({ id })) : Effect.succeed({ id, at: new Date(Date.UTC(2026, 0, 2)) })),
  Whoami: () => User,
  Crash: ({ message }) => Effect.die(new Error(message)),
  BadOutput: () => Effect.succeed({ n: "not a number" } as unknown as { n: number })
})

const Middleware = Layer.mergeAll(
  Layer.succeed(Auth, ({ headers }) => (headers["x-user"] !== undefined ? Effect.succeed(headers["x-user"]) : Effect.fail(new Denied({ reason: "no user" })))),
  Layer.succeed(Gate, ({ headers }) => (headers["x-block"] !== undefined ? Effect.fail(new Denied({ reason: "blocked" })) : Effect.void)),
  Layer.succeed(Soft, () => Effect.fail(new Denied({ reason: "ignored" })))
)

const Env = Layer.mergeAll(Handlers, Middleware, RpcSerialization.layerJson)

/** What an app answers `body` (with `headers`): status, content type and text. */
const answer = (app: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>, body: string, headers: Record<string, string>) =>
  Effect.gen(function* () {
    const request = HttpServerRequest.fromWeb(new Request("http://test/rpc", { method: "POST", body, headers: { "content-type": "application/json", ...headers } }))
    const response = yield* Effect.scoped(Effect.provideService(app, HttpServerRequest.HttpServerRequest, request))
    const web = HttpServerResponse.toWeb(response)
    return { status: web.status, contentType: web.headers.get("content-type"), text: yield* Effect.promise(() => web.text()) }
  })

const apps = Effect.gen(function* () {
  const exchange = yield* RpcExchange.make(Group, { tracing: false })
  const upstream = yield* RpcServer.toHttpApp(Group, { disableFatalDefects: true, disableTracing: true })
  return { exchange, upstream }
}).pipe(Effect.provide(Env))

const request = (tag: string, payload: unknown, id = "1", headers: ReadonlyArray<readonly [string, string]> = []) => ({ _tag: "Request", id, tag, payload, headers })

/** Bodies the two must answer alike: every outcome of a request, batches, pings, noise. */
const cases: ReadonlyArray<readonly [string, string, Record<string, string>?]> = [
  ["success", JSON.stringify(request("Echo", { text: "hi", times: 3 }))],
  ["success, payload as the schema's encoded form", JSON.stringify(request("Find", { id: "a1" }))],
  ["typed failure", JSON.stringify(request("Find", { id: "missing" }))],
  ["payload the schema refuses", JSON.stringify(request("Echo", { text: 1 }))],
  ["payload with an excess key (decoded as RpcServer decodes it)", JSON.stringify(request("Echo", { text: "a", extra: true }))],
  ["unknown tag", JSON.stringify(request("Nope", {}))],
  ["middleware providing a service, from the HTTP headers", JSON.stringify(request("Whoami", {})), { "x-user": "ada" }],
  ["middleware providing a service, from the message's headers", JSON.stringify(request("Whoami", {}, "1", [["x-user", "bob"]]))],
  ["middleware refusing", JSON.stringify(request("Whoami", {}))],
  ["a second middleware refusing", JSON.stringify(request("Whoami", {})), { "x-user": "ada", "x-block": "1" }],
  ["defect", JSON.stringify(request("Crash", { message: "boom" }))],
  ["output the success schema refuses", JSON.stringify(request("BadOutput", {}))],
  ["ping", JSON.stringify({ _tag: "Ping" })],
  ["ack of nothing", JSON.stringify({ _tag: "Ack", requestId: "9" })],
  ["interrupt of nothing", JSON.stringify({ _tag: "Interrupt", requestId: "9" })],
  ["end of input", JSON.stringify({ _tag: "Eof" })],
  ["malformed JSON", "{not json"]
]

describe("rpcExchange against RpcServer.toHttpApp", () => {
  it.scoped("answers each kind of request with the same status, content type and bytes", () =>
    Effect.gen(function* () {
      const { exchange, upstream } = yield* apps
      for (const [name, body, headers] of cases) {
        const mine = yield* answer(exchange, body, headers ?? {})
        const theirs = yield* answer(upstream, body, headers ?? {})
        assert.deepStrictEqual(mine, theirs, name)
      }
    }))

  it.scoped("answers random requests of the group alike", () =>
    Effect.gen(function* () {
      const { exchange, upstream } = yield* apps
      const payload = fc.oneof(
        fc.record({ text: fc.oneof(fc.string({ maxLength: 5 }), fc.integer()), times: fc.option(fc.oneof(fc.integer({ min: 0, max: 3 }), fc.double()), { nil: undefined }) }, { requiredKeys: [] }),
        fc.record({ id: fc.oneof(fc.constantFrom("missing", "a"), fc.string({ maxLength: 4 })) }),
        fc.jsonValue({ maxDepth: 2 })
      )
      const message = fc.record({
        tag: fc.constantFrom("Echo", "Find", "Whoami", "Crash", "BadOutput", "Other"),
        payload,
        id: fc.nat({ max: 1000 }).map(String),
        headers: fc.array(fc.tuple(fc.constantFrom("x-user", "x-block", "x-other"), fc.string({ maxLength: 3 })), { maxLength: 2 })
      })
      for (const m of fc.sample(message, 300)) {
        const body = JSON.stringify(request(m.tag, m.payload, m.id, m.headers))
        const mine = yield* answer(exchange, body, {})
        const theirs = yield* answer(upstream, body, {})
        assert.deepStrictEqual(mine, theirs, body)
      }
    }))

  it.scoped("differs only on a message the gate refuses: one of no client _tag is ignored, where RpcServer answers a defect", () =>
    Effect.gen(function* () {
      const { exchange, upstream } = yield* apps
      // The JSON serialization reads a body as one message: an array is one message without a tag.
      const body = JSON.stringify([request("Echo", { text: "a" })])
      assert.strictEqual((yield* answer(exchange, body, {})).text, "[]")
      assert.strictEqual((yield* answer(upstream, body, {})).text, `[{"_tag":"Defect","defect":"Unknown request tag: undefined"}]`)
    }))
})

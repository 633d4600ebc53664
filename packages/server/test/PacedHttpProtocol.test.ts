// The paced streaming-HTTP protocol (`internal/pacedHttpProtocol`) against the one it copies,
// @effect/rpc's `RpcServer.makeProtocolWithHttpApp`: the same RpcServer over each, on real
// node:http servers, answers the same NDJSON bodies (plain RPCs, failures, streams of many
// elements, unknown tags, malformed lines) with the same status, content type and bytes, when
// the reader keeps up (pacing only ever holds a stream back, and only `paced` streams).
import { createServer } from "node:http"
import { type AddressInfo } from "node:net"
import { NodeHttpServer } from "@effect/platform-node"
import { type HttpApp } from "@effect/platform"
import { Rpc, RpcGroup, RpcSerialization, RpcServer } from "@effect/rpc"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema, type Scope, Stream } from "effect"
import * as PacedHttpProtocol from "../src/internal/pacedHttpProtocol.js"

class Missing extends Schema.TaggedError<Missing>()("Missing", { id: Schema.String }) {}

class Group extends RpcGroup.make(
  Rpc.make("Echo", { payload: { text: Schema.String }, success: Schema.String }),
  Rpc.make("Find", { payload: { id: Schema.String }, success: Schema.String, error: Missing }),
  Rpc.make("Count", { payload: { n: Schema.Int }, success: Schema.Int, stream: true }),
  Rpc.make("Broken", { payload: { n: Schema.Int }, success: Schema.Int, error: Missing, stream: true })
) {}

const Handlers = Group.toLayer({
  Echo: ({ text }) => Effect.succeed(text),
  Find: ({ id }) => (id === "missing" ? Effect.fail(new Missing({ id })) : Effect.succeed(id)),
  Count: ({ n }) => Stream.range(1, n),
  Broken: ({ n }) => Stream.concat(Stream.range(1, n), Stream.fail(new Missing({ id: "after" })))
})

/** A node:http server for `app` on 127.0.0.1; its port. */
const listen = (app: HttpApp.Default<never, Scope.Scope>) =>
  Effect.gen(function* () {
    const server = createServer(yield* NodeHttpServer.makeHandler(app))
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
      () => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))))
    )
    return (server.address() as AddressInfo).port
  })

/** The RpcServer of the group over `protocol`, running for the scope. */
const serve = (protocol: RpcServer.Protocol["Type"]) =>
  RpcServer.make(Group, { disableTracing: true }).pipe(Effect.provideService(RpcServer.Protocol, protocol), Effect.provide(Handlers), Effect.forkScoped)

const servers = Effect.gen(function* () {
  const paced = yield* PacedHttpProtocol.make({ bufferBytes: 1 << 20, stallMs: 5_000 })
  yield* serve(paced.protocol)
  const upstream = yield* RpcServer.makeProtocolWithHttpApp
  yield* serve(upstream.protocol)
  return { mine: yield* listen(paced.httpApp), theirs: yield* listen(upstream.httpApp) }
}).pipe(Effect.provide(Layer.mergeAll(RpcSerialization.layerNdjson)))

const post = (port: number, body: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}/`, { method: "POST", body, headers: { "content-type": "application/ndjson" } })
    return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() }
  })

const line = (message: unknown) => JSON.stringify(message) + "\n"
const request = (tag: string, payload: unknown, id = "1") => line({ _tag: "Request", id, tag, payload, headers: [] })

const bodies: ReadonlyArray<readonly [string, string]> = [
  ["success", request("Echo", { text: "hi" })],
  ["typed failure", request("Find", { id: "missing" })],
  ["payload the schema refuses", request("Echo", { text: 1 })],
  ["unknown tag", request("Nope", {})],
  ["a stream of one chunk", request("Count", { n: 3 })],
  ["a long stream", request("Count", { n: 5_000 })],
  ["a stream that fails after its elements", request("Broken", { n: 10 })],
  ["two requests, one a stream", request("Echo", { text: "a" }, "1") + request("Count", { n: 20 }, "2")],
  ["ping", line({ _tag: "Ping" })],
  ["malformed line", "{not json\n"]
]

describe("pacedHttpProtocol against RpcServer.makeProtocolWithHttpApp", () => {
  it.scoped("answers each body with the same status, content type and bytes", () =>
    Effect.gen(function* () {
      const { mine, theirs } = yield* servers
      for (const [name, body] of bodies) {
        assert.deepStrictEqual(yield* post(mine, body), yield* post(theirs, body), name)
      }
    }))
})

// `bodyText` against the platform's own `request.text`, on a real node:http server on 127.0.0.1:
// the same text (chunks split inside multi-byte characters), read once for every reader, the
// same refusal over the limit, and a caller that hangs up mid-body ends the read.
import { createServer, request as httpRequest } from "node:http"
import { type AddressInfo } from "node:net"
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Option } from "effect"
import { bodyText } from "@cairn/server/http/RequestBody"

type Reader = "bodyText" | "platform"

/** A server answering each POST with what its reader made of the body (twice, to check it is kept). */
const serve = (reader: Reader, maxBytes: number, outcomes: Deferred.Deferred<string>) =>
  Effect.gen(function* () {
    const app = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const read = reader === "bodyText" ? bodyText(request) : request.text
      const first = yield* Effect.either(read)
      const second = yield* Effect.either(read)
      const describe = (outcome: Either.Either<string, { readonly reason: string; readonly cause?: unknown }>) =>
        Either.isRight(outcome) ? `text:${outcome.right}` : `${outcome.left.reason}:${(outcome.left.cause as Error).message}`
      const answer = `${describe(first)}|${describe(second)}`
      yield* Deferred.succeed(outcomes, answer)
      return HttpServerResponse.text(answer)
    }).pipe(Effect.provideService(HttpIncomingMessage.MaxBodySize, Option.some(maxBytes as never)))
    const handler = yield* NodeHttpServer.makeHandler(app)
    const server = createServer(handler)
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
      () => Effect.sync(() => server.closeAllConnections()).pipe(Effect.zipRight(Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))))
    )
    return (server.address() as AddressInfo).port
  })

/** POSTs `chunks` one write each (chunked encoding); `hangUp` destroys the request after them. */
const post = (port: number, chunks: ReadonlyArray<Buffer>, hangUp = false) =>
  Effect.async<string | undefined>((resume) => {
    const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/" }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => resume(Effect.succeed(text)))
    })
    req.on("error", () => resume(Effect.succeed(undefined)))
    const writeAll = async () => {
      for (const chunk of chunks) {
        await new Promise<void>((done) => req.write(chunk, () => done()))
        await new Promise((done) => setTimeout(done, 5))
      }
      if (hangUp) req.destroy()
      else req.end()
    }
    void writeAll()
  })

const text = "zebra ünïcødé 🦓 body"
const bytes = Buffer.from(text, "utf8")
// Split inside the emoji's four bytes and inside a two-byte character.
const split = [bytes.subarray(0, 8), bytes.subarray(8, 19), bytes.subarray(19)]

describe("bodyText", () => {
  for (const reader of ["bodyText", "platform"] as const) {
    it.scoped(`${reader}: the text of a body sent in chunks split inside characters, the same for a second reader`, () =>
      Effect.gen(function* () {
        const outcomes = yield* Deferred.make<string>()
        const port = yield* serve(reader, 1024, outcomes)
        expect(yield* post(port, split)).toBe(`text:${text}|text:${text}`)
        const empty = yield* Deferred.make<string>()
        const emptyPort = yield* serve(reader, 1024, empty)
        expect(yield* post(emptyPort, [])).toBe("text:|text:")
      })
    )

    it.scoped(`${reader}: a body over the limit is refused as maxBytes exceeded`, () =>
      Effect.gen(function* () {
        const outcomes = yield* Deferred.make<string>()
        const port = yield* serve(reader, 16, outcomes)
        yield* post(port, [Buffer.alloc(10, 97), Buffer.alloc(10, 98), Buffer.alloc(10, 99)])
        expect(yield* Deferred.await(outcomes)).toBe("Decode:maxBytes exceeded|Decode:maxBytes exceeded")
      })
    )
  }

  it.scoped("a caller that hangs up mid-body ends the read with a failure (no reader is left waiting)", () =>
    Effect.gen(function* () {
      const outcomes = yield* Deferred.make<string>()
      const port = yield* serve("bodyText", 1024, outcomes)
      yield* post(port, [Buffer.from("partial")], true)
      expect(yield* Deferred.await(outcomes)).toMatch(/^Decode:.+\|Decode:.+$/)
    })
  )
})

/**
 * A request's body as text, exactly as `request.text` reads it — once per request, under the
 * context's `MaxBodySize`, failing with the same `RequestError` (a body over the limit as
 * "maxBytes exceeded", the request then destroyed) — without the platform's per-request
 * machinery: its `text` builds a cached effect for every request (a fiber run synchronously, a
 * synchronized ref, a deferred, an acquire/release) and decodes each chunk through a string
 * decoder (measured: ~20–30 µs per `/db/rpc` or `/mcp` request under load). Here a Node
 * request's chunks are collected and decoded once, and the outcome is kept with the request.
 *
 * Every reader of one request's text must read it here: the `/db` gate, `/db/rpc`'s exchange,
 * `/db/sync`'s protocol and `/mcp` do. A request from elsewhere (a web `Request`) goes to
 * `request.text`.
 */
import { IncomingMessage } from "node:http"
import { HttpIncomingMessage, HttpServerError, type HttpServerRequest } from "@effect/platform"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Either, Option } from "effect"
import { Correlation } from "../engine/Correlation.js"
import { payloadTooLarge } from "../internal/frontError.js"

type Outcome = Either.Either<string, HttpServerError.RequestError>

/** A body being read (who waits for it) or read (its outcome). */
interface Read {
  outcome: Outcome | undefined
  readonly waiting: Array<(outcome: Outcome) => void>
}

const reads = new WeakMap<IncomingMessage, Read>()

const start = (request: HttpServerRequest.HttpServerRequest, source: IncomingMessage, maxBytes: number | undefined): Read => {
  const read: Read = { outcome: undefined, waiting: [] }
  const settle = (outcome: Outcome) => {
    if (read.outcome !== undefined) return
    read.outcome = outcome
    source.off("data", onData)
    for (const resume of read.waiting.splice(0)) resume(outcome)
  }
  const refuse = (cause: unknown) => settle(Either.left(new HttpServerError.RequestError({ request, reason: "Decode", cause })))
  const chunks: Array<Buffer> = []
  let bytes = 0
  if (source.readableEnded) {
    // Read already by another reader: failing says so where waiting would hang.
    refuse(new Error("the request body was already read"))
    return read
  }
  const onData = (chunk: Buffer) => {
    chunks.push(chunk)
    bytes += chunk.length
    if (maxBytes !== undefined && bytes > maxBytes) {
      refuse(new Error("maxBytes exceeded"))
      // As the platform leaves it: the rest of an oversized body is not read. A body that has
      // all arrived has no rest, and destroying it would drop the connection before the 413.
      if (!source.closed && !source.complete) source.destroy()
    }
  }
  source.on("data", onData)
  source.once("error", refuse)
  source.once("end", () => settle(Either.right(chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8"))))
  // A caller that goes away mid-body ends the read (the platform's reader would wait for an interruption).
  source.once("close", () => {
    if (!source.complete) refuse(new Error("the request was closed before its body ended"))
  })
  return read
}

/** `request.text`, read once per request without the platform's per-request machinery. */
export const bodyText = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, HttpServerError.RequestError> => {
  const source = NodeHttpServerRequest.toIncomingMessage(request) as unknown
  if (!(source instanceof IncomingMessage)) return request.text
  return Effect.flatMap(HttpIncomingMessage.MaxBodySize, (maxBodySize) =>
    Effect.async<string, HttpServerError.RequestError>((resume) => {
      let read = reads.get(source)
      if (read === undefined) {
        read = start(request, source, Option.isSome(maxBodySize) ? Number(maxBodySize.value) : undefined)
        reads.set(source, read)
      }
      const answer = (outcome: Outcome) => resume(Either.isRight(outcome) ? Effect.succeed(outcome.right) : Effect.fail(outcome.left))
      if (read.outcome !== undefined) return answer(read.outcome)
      const waiting = read.waiting
      waiting.push(answer)
      return Effect.sync(() => {
        const at = waiting.indexOf(answer)
        if (at >= 0) waiting.splice(at, 1)
      })
    })
  )
}

/** Whether a failed read of `bodyText` is the body crossing the size limit (rather than, say, a hang-up). */
export const isTooLarge = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "cause" in error && error.cause instanceof Error && error.cause.message === "maxBytes exceeded"

/** The front's 413 for a body that crossed `limitBytes` while it was read: the same answer as for one declared too large. */
export const tooLargeAnswer = (limitBytes: number) => Effect.map(Correlation.id, (requestId) => payloadTooLarge(requestId, limitBytes))

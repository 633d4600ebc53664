/**
 * @effect/rpc's streaming-HTTP server protocol (`makeProtocolWithHttpApp`, framed
 * serializations only) with flow control. The stock protocol offers every response to an
 * unbounded mailbox, so a stream whose reader stopped reading buffers without limit. Here
 * each HTTP exchange counts the bytes it holds (queued, or handed to the socket and not yet
 * drained), and a streaming handler wrapped in `paced` pulls its next element only while
 * that count is within the bound, ending cleanly when it stays above it too long: with its
 * `final` element (what the reader is told), then its exit and the end of the response. The
 * exchange's socket is destroyed only when its reader then takes nothing for `stallMs` (gone,
 * or paused for good); a slow reader gets the final element and a clean close.
 * An exit the route answers itself (`refusal`) is not sent: before the response is under
 * way the exchange fails with it (whatever else was queued is dropped), after, the request
 * ends interrupted.
 */
import { type HttpApp, type HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { bodyText } from "../http/RequestBody.js"
import { ParsedEnvelope } from "../http/RpcEnvelope.js"
import { RpcMessage, RpcSerialization, RpcServer } from "@effect/rpc"
import { Chunk, Effect, Mailbox, Option, Scope, Stream } from "effect"
import { writeNow } from "./writeNow.js"

export interface PacingOptions<R> {
  /** Most bytes one exchange may hold before its streams stop producing. */
  readonly bufferBytes: number
  /** How long a stream may wait for room before it ends. */
  readonly stallMs: number
  /** What the route answers itself, read from an encoded failed exit's cause (see `RpcExchange`). */
  readonly refusal?: (cause: unknown) => R | undefined
}

interface Flow {
  /** Bytes queued or written to the socket and not yet drained. */
  held: number
  /** Open while `held` is within the bound. */
  readonly room: Effect.Latch
  /** A stream of the exchange ended on a stall: while its reader takes nothing for `stallMs`, its socket is closed. */
  readonly stalled: Effect.Effect<void>
}

export interface PacedProtocol<R = never> {
  readonly protocol: RpcServer.Protocol["Type"]
  /** Fails with a refusal an exit carried before the response was under way. */
  readonly httpApp: HttpApp.Default<R, Scope.Scope>
  /**
   * `stream`, pulled only while the exchange of `clientId` holds at most the bound; it ends
   * (as if finished) once it has waited `stallMs` for room. Its consumer then sees every
   * element produced so far, `final` if given (what the reader is told), and the end of the stream.
   */
  readonly paced: <A, E, R>(clientId: number, stream: Stream.Stream<A, E, R>, final?: A) => Stream.Stream<A, E, R>
  /**
   * Writes pre-encoded elements of the stream of the exchange `clientId` straight to it (see
   * `SyncLiveSink`): `offer` takes the JSON text of one encoded element, frames it as the
   * RPC server would (a `Chunk` of one value) and queues it, or answers `false` when the
   * exchange is gone or holds more than the bound (the stream then sends it, paced).
   * Undefined when the exchange is not one NDJSON request.
   */
  readonly direct: (clientId: number) => { readonly offer: (message: string) => boolean } | undefined
}

export const make = <R = never>(options: PacingOptions<R>): Effect.Effect<PacedProtocol<R>, never, RpcSerialization.RpcSerialization> =>
  Effect.gen(function* () {
    const serialization = yield* RpcSerialization.RpcSerialization
    if (!serialization.includesFraming) return yield* Effect.dieMessage("a paced protocol needs a framed serialization")
    const isBinary = !serialization.contentType.includes("json")
    const encoder = new TextEncoder()

    const disconnects = yield* Mailbox.make<number>()
    let writeRequest!: (clientId: number, message: RpcMessage.FromClientEncoded) => Effect.Effect<void>
    let nextId = 0

    interface Client {
      /** The id of the exchange's only request, if it carries one. */
      readonly only: () => string | undefined
      /**
       * Sends text now: straight to the socket when the response is idle (its stream waits for
       * more, nothing is queued ahead), else queued; false when the exchange ended.
       */
      readonly unsafeOffer: (text: string) => boolean
      readonly write: (response: RpcMessage.FromServerEncoded) => Effect.Effect<void>
      /** Answers the exchange with `refusal` instead of its RPC answers (see `refusal`). */
      readonly refuse: (requestId: string, refusal: R) => Effect.Effect<void>
      readonly end: Effect.Effect<void>
      readonly flow: Flow
    }
    const clients = new Map<number, Client>()
    const clientIds = new Set<number>()

    const release = (flow: Flow, bytes: number) => {
      flow.held -= bytes
      if (flow.held <= options.bufferBytes) flow.room.unsafeOpen()
    }

    const httpApp: HttpApp.Default<R, Scope.Scope> = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const scope = yield* Effect.scope
      const requestHeaders = Object.entries(request.headers)
      // A text body's messages as the gate's envelope check parsed them (see `ParsedEnvelope`).
      const parsed = isBinary ? Option.none() : yield* Effect.serviceOption(ParsedEnvelope)
      const data: string | Uint8Array = Option.isSome(parsed)
        ? ""
        : yield* Effect.orDie<string | Uint8Array, HttpServerError.RequestError, never>(
            isBinary ? Effect.map(request.arrayBuffer, (ab) => new Uint8Array(ab)) : bodyText(request)
          )
      const id = nextId++
      const mailbox = yield* Mailbox.make<Uint8Array, R>()
      const parser = serialization.unsafeMake()
      let abandoning = false
      /** The response's stream waits on an empty mailbox: all it pulled before was written to the socket. */
      let idle = false
      let ended = false
      /** The response is under way: its status and first bytes are decided. */
      let streaming = false
      const nodeResponse = NodeHttpServerRequest.toServerResponse(request)
      const flow: Flow = {
        held: 0,
        room: yield* Effect.makeLatch(true),
        // A reader that never drains (gone without a FIN, or paused for good) must not pin what
        // the exchange holds: once it takes nothing for `stallMs`, the socket is destroyed, which
        // ends the exchange and frees it. A reader still taking bytes drains to the clean end.
        stalled: Effect.suspend(() => {
          if (abandoning) return Effect.void
          abandoning = true
          const watch = (before: number): Effect.Effect<void> =>
            Effect.flatMap(Effect.sleep(options.stallMs), () => {
              if (ended || flow.held <= 0) return Effect.void
              if (flow.held < before) return watch(flow.held)
              return Effect.sync(() => NodeHttpServerRequest.toServerResponse(request)?.destroy())
            })
          return Effect.suspend(() => watch(flow.held)).pipe(Effect.forkIn(scope), Effect.asVoid)
        })
      }

      const requestIds: Array<RpcMessage.RequestId> = []
      const offer = (encoded: Uint8Array | string) => {
        const bytes = typeof encoded === "string" ? encoder.encode(encoded) : encoded
        flow.held += bytes.length
        return mailbox.offer(bytes)
      }
      const client: Client = {
        only: () => (requestIds.length === 1 ? String(requestIds[0]) : undefined),
        unsafeOffer: (text) => {
          if (idle && !ended && nodeResponse !== undefined && !nodeResponse.writableEnded && !nodeResponse.destroyed && Option.getOrElse(mailbox.unsafeSize(), () => 1) === 0) {
            // Written in order after everything the stream wrote; held until the socket takes it.
            const bytes = Buffer.byteLength(text)
            flow.held += bytes
            // Out now, not once the hub's run ends (see `writeNow`).
            writeNow(nodeResponse, text, () => {
              if (!ended) release(flow, bytes)
            })
            return true
          }
          const bytes = encoder.encode(text)
          if (!mailbox.unsafeOffer(bytes)) return false
          flow.held += bytes.length
          return true
        },
        write: (response) => {
          try {
            const encoded = parser.encode(response)
            return encoded === undefined ? Effect.void : offer(encoded)
          } catch (cause) {
            return offer(parser.encode(RpcMessage.ResponseDefectEncoded(cause))!)
          }
        },
        refuse: (requestId, refusal) =>
          streaming
            ? client.write({ _tag: "Exit", requestId, exit: { _tag: "Failure", cause: { _tag: "Interrupt", fiberId: { _tag: "None" } } } } as RpcMessage.FromServerEncoded)
            : Effect.asVoid(mailbox.fail(refusal)),
        end: mailbox.end,
        flow
      }
      clientIds.add(id)
      clients.set(id, client)

      yield* Scope.addFinalizer(
        scope,
        Effect.suspend(() => {
          ended = true
          clientIds.delete(id)
          clients.delete(id)
          disconnects.unsafeOffer(id)
          // Whatever was queued is gone with the exchange; a paced stream must not wait for it.
          release(flow, flow.held)
          if (mailbox.unsafeSize()._tag === "None") return Effect.void
          return Effect.forEach(requestIds, (requestId) => writeRequest(id, { _tag: "Interrupt", requestId: String(requestId) }), {
            discard: true
          })
        })
      )

      try {
        // The gate's parse gives the messages the parser would; without one, the parser reads the body.
        const decoded = (Option.isSome(parsed) ? parsed.value : parser.decode(data)) as ReadonlyArray<RpcMessage.FromClientEncoded>
        // Every request of the exchange is known before any handler runs (see `direct`).
        for (const message of decoded) {
          if (message._tag === "Request") {
            requestIds.push(RpcMessage.RequestId(message.id))
            ;(message as { headers: ReadonlyArray<[string, string]> }).headers = requestHeaders.concat(message.headers)
          }
        }
        for (const message of decoded) yield* writeRequest(id, message)
      } catch (cause) {
        yield* client.write(RpcMessage.ResponseDefectEncoded(cause))
      }
      yield* writeRequest(id, RpcMessage.constEof)

      // Fails with a refusal that came before any answer.
      const [initial, done] = yield* mailbox.takeAll
      // Finished (then `done`), or refused after some answers were queued (the mailbox is already
      // closed with the refusal, which still answers the whole exchange).
      if (done || Option.isNone(mailbox.unsafeSize())) {
        release(flow, flow.held)
        yield* mailbox.await
        return HttpServerResponse.uint8Array(concat(initial), { contentType: serialization.contentType })
      }
      streaming = true
      // The server writes a chunk to the socket and waits for "drain" before it pulls the
      // next one, so the previous chunk's bytes have left the process when the next is pulled.
      let written = 0
      const pull = Effect.suspend(() => {
        release(flow, written)
        written = 0
        idle = true
        // Once the response is under way, a refusal is sent as an interrupted request, never as the mailbox's failure.
        return Effect.orDie(mailbox.takeAll)
      }).pipe(
        Effect.flatMap(([chunk, finished]) => {
          idle = false
          if (Chunk.isEmpty(chunk)) return finished ? Effect.fail(Option.none()) : Effect.succeed(chunk)
          written = Chunk.reduce(chunk, 0, (n, bytes) => n + bytes.length)
          return Effect.succeed(chunk)
        })
      )
      written = Chunk.reduce(initial, 0, (n, bytes) => n + bytes.length)
      return HttpServerResponse.stream(Stream.concat(Stream.fromChunk(initial), Stream.repeatEffectChunkOption(pull)), {
        contentType: serialization.contentType
      })
    }).pipe(Effect.interruptible, Effect.withUnhandledErrorLogLevel(Option.none()))

    const protocol = yield* RpcServer.Protocol.make((writeRequest_) => {
      writeRequest = writeRequest_
      return Effect.succeed({
        disconnects,
        send: (clientId, response) => {
          const client = clients.get(clientId)
          if (client === undefined) return Effect.void
          if (response._tag !== "Exit" || response.exit._tag !== "Failure") return client.write(response)
          const refused = options.refusal?.(response.exit.cause)
          return refused === undefined ? client.write(response) : client.refuse(response.requestId, refused)
        },
        end: (clientId) => clients.get(clientId)?.end ?? Effect.void,
        clientIds: Effect.sync(() => clientIds),
        initialMessage: Effect.succeedNone,
        supportsAck: false,
        supportsTransferables: false,
        supportsSpanPropagation: false
      })
    })

    /** Waits until the exchange has room; `false` when it stayed full for `stallMs`. */
    const awaitRoom = (clientId: number): Effect.Effect<boolean> => {
      const wait: Effect.Effect<void> = Effect.suspend(() => {
        const flow = clients.get(clientId)?.flow
        if (flow === undefined || flow.held <= options.bufferBytes) return Effect.void
        flow.room.unsafeClose()
        return Effect.zipRight(flow.room.await, wait)
      })
      return Effect.timeoutTo(wait, { duration: options.stallMs, onSuccess: () => true, onTimeout: () => false })
    }

    const stalled = (clientId: number) => Effect.suspend(() => clients.get(clientId)?.flow.stalled ?? Effect.void)

    const paced = <A, E, R>(clientId: number, stream: Stream.Stream<A, E, R>, final?: A): Stream.Stream<A, E, R> =>
      Stream.unwrapScoped(
        Effect.map(Stream.toPull(stream), (pull) => {
          let stopped = false
          const end = Effect.fail(Option.none())
          // The final element goes out although the exchange is full: one small frame past the bound.
          const stop = Effect.zipRight(
            stalled(clientId),
            Effect.suspend(() => {
              stopped = true
              return final === undefined ? end : Effect.succeed(Chunk.of(final))
            })
          )
          return Stream.repeatEffectChunkOption(
            Effect.suspend(() => (stopped ? end : Effect.flatMap(awaitRoom(clientId), (room) => (room ? pull : stop))))
          )
        })
      )

    const ndjson = serialization.contentType === "application/ndjson"
    const direct = (clientId: number) => {
      if (!ndjson) return undefined
      const requestId = clients.get(clientId)?.only()
      if (requestId === undefined) return undefined
      const prefix = `{"_tag":"Chunk","requestId":${JSON.stringify(requestId)},"values":[`
      return {
        offer: (message: string) => {
          const client = clients.get(clientId)
          if (client === undefined || client.flow.held > options.bufferBytes) return false
          return client.unsafeOffer(`${prefix}${message}]}\n`)
        }
      }
    }

    return { protocol, httpApp, paced, direct } satisfies PacedProtocol<R>
  })

const concat = (arrays: Chunk.Chunk<Uint8Array>): Uint8Array => {
  if (arrays.length === 1) return Chunk.unsafeHead(arrays)
  const result = new Uint8Array(Chunk.reduce(arrays, 0, (n, a) => n + a.length))
  let offset = 0
  for (const array of arrays) {
    result.set(array, offset)
    offset += array.length
  }
  return result
}

/**
 * @effect/rpc's HTTP server protocol for an unframed serialization (JSON: one body in, one
 * array of responses out), as `makeProtocolWithHttpApp` does it but lean per request: the
 * responses of an exchange go to a plain array and the exchange waits on one callback, not
 * a mailbox; cleanup is an exit hook, not a scope finalizer; and only an exchange cut short
 * (timeout, hang-up) interrupts its RPCs and reports a disconnect. Same bytes on the wire.
 */
import { type HttpApp, type HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { RpcMessage, RpcSerialization, RpcServer } from "@effect/rpc"
import { Effect, Mailbox, Option } from "effect"

export interface JsonHttpProtocol {
  readonly protocol: RpcServer.Protocol["Type"]
  readonly httpApp: HttpApp.Default
}

interface Exchange {
  readonly responses: Array<RpcMessage.FromServerEncoded>
  ended: boolean
  wake: (() => void) | undefined
}

export const make: Effect.Effect<JsonHttpProtocol, never, RpcSerialization.RpcSerialization> = Effect.gen(function* () {
  const serialization = yield* RpcSerialization.RpcSerialization
  if (serialization.includesFraming) return yield* Effect.dieMessage("the JSON HTTP protocol needs an unframed serialization")
  // The unframed serializations keep no state between messages: one parser serves every exchange.
  const parser = serialization.unsafeMake()
  const disconnects = yield* Mailbox.make<number>()
  let writeRequest!: (clientId: number, message: RpcMessage.FromClientEncoded) => Effect.Effect<void>
  let nextId = 0
  const exchanges = new Map<number, Exchange>()
  const clientIds = new Set<number>()

  const httpApp: HttpApp.Default = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const data = yield* Effect.orDie<string, HttpServerError.RequestError, never>(request.text)
    const id = nextId++
    const exchange: Exchange = { responses: [], ended: false, wake: undefined }
    exchanges.set(id, exchange)
    clientIds.add(id)
    const requestIds: Array<RpcMessage.RequestId> = []
    const exchanged = Effect.gen(function* () {
      try {
        const requestHeaders = Object.entries(request.headers)
        const decoded = parser.decode(data) as ReadonlyArray<RpcMessage.FromClientEncoded>
        for (const message of decoded) {
          if (message._tag === "Request") {
            requestIds.push(RpcMessage.RequestId(message.id))
            ;(message as { headers: ReadonlyArray<[string, string]> }).headers = requestHeaders.concat(message.headers)
          }
          yield* writeRequest(id, message)
        }
      } catch (cause) {
        exchange.responses.push(RpcMessage.ResponseDefectEncoded(cause))
      }
      yield* writeRequest(id, RpcMessage.constEof)
      if (!exchange.ended) {
        yield* Effect.async<void>((resume) => {
          if (exchange.ended) return resume(Effect.void)
          exchange.wake = () => resume(Effect.void)
        })
      }
      return HttpServerResponse.text(parser.encode(exchange.responses) as string, { contentType: serialization.contentType })
    })
    return yield* Effect.onExit(exchanged, () =>
      Effect.suspend(() => {
        exchanges.delete(id)
        clientIds.delete(id)
        if (exchange.ended) return Effect.void
        // Cut short: the server forgets the client and interrupts what still runs for it.
        disconnects.unsafeOffer(id)
        return Effect.forEach(requestIds, (requestId) => writeRequest(id, { _tag: "Interrupt", requestId: String(requestId) }), { discard: true })
      })
    )
  }).pipe(Effect.interruptible, Effect.withUnhandledErrorLogLevel(Option.none()))

  const protocol = yield* RpcServer.Protocol.make((writeRequest_) => {
    writeRequest = writeRequest_
    return Effect.succeed({
      disconnects,
      send: (clientId, response) =>
        Effect.sync(() => {
          exchanges.get(clientId)?.responses.push(response)
        }),
      end: (clientId) =>
        Effect.sync(() => {
          const exchange = exchanges.get(clientId)
          if (exchange === undefined || exchange.ended) return
          exchange.ended = true
          exchange.wake?.()
        }),
      clientIds: Effect.sync(() => clientIds),
      initialMessage: Effect.succeedNone,
      supportsAck: false,
      supportsTransferables: false,
      supportsSpanPropagation: false
    })
  })

  return { protocol, httpApp }
})

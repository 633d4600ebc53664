/**
 * One HTTP request's exchange with an @effect/rpc group over an unframed serialization (JSON:
 * one message in, one array of responses out), answered on the request's own fiber. It uses
 * the group's handlers, middleware, payload and exit schemas and serialization exactly as
 * `RpcServer` does, and sends the same bytes; what it leaves out is `RpcServer`'s machinery
 * for long-lived clients, which an HTTP request does not have: a fiber per RPC started with a
 * merged copy of the whole application context, the client registry, and answers routed
 * through the protocol's send/end loop (measured: ~50 µs of CPU per `/db/rpc` read, of ~1,100).
 *
 * The handler runs interruptibly on the request's fiber, so a deadline or a hang-up cuts it
 * off directly. A streaming RPC is not served here (its group belongs on a framed protocol).
 * An exit the route answers itself (`refusal`) is not sent: the exchange fails with it.
 */
import { Headers, type HttpApp, type HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Rpc, type RpcGroup, RpcMessage, type RpcMiddleware, RpcSchema, RpcSerialization } from "@effect/rpc"
import { type Cause, type Context, Effect, Either, Exit, Option, ParseResult, Schema } from "effect"
import { bodyText } from "../http/RequestBody.js"
import { ParsedEnvelope } from "../http/RpcEnvelope.js"

interface Schemas {
  readonly decode: (payload: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodeExit: (exit: Exit.Exit<unknown, unknown>) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodeDefect: (defect: unknown) => Either.Either<unknown, ParseResult.ParseError>
}

const encodeAnyDefect = Schema.encodeSync(Schema.Defect)

/** The handler wrapped in the RPC's middleware, as `RpcServer` applies it (the last declared runs outermost). */
const withMiddleware = (
  rpc: Rpc.AnyWithProps,
  context: Context.Context<never>,
  clientId: number,
  payload: unknown,
  headers: Headers.Headers,
  handler: Effect.Effect<unknown, unknown, unknown>
): Effect.Effect<unknown, unknown, unknown> => {
  const options = { rpc, payload, headers, clientId }
  for (const tag of rpc.middlewares as ReadonlySet<RpcMiddleware.TagClassAnyWithProps>) {
    const middleware = context.unsafeMap.get(tag.key)
    if (tag.wrap) {
      handler = middleware({ ...options, next: handler })
    } else if (tag.optional) {
      const previous = handler
      handler = Effect.matchEffect(middleware(options) as Effect.Effect<unknown, unknown>, {
        onFailure: () => previous,
        onSuccess: (value) => (tag.provides !== undefined ? Effect.provideService(previous, tag.provides, value) : previous)
      })
    } else {
      handler =
        tag.provides !== undefined
          ? Effect.provideServiceEffect(handler, tag.provides, middleware(options))
          : Effect.zipRight(middleware(options) as Effect.Effect<unknown, unknown>, handler)
    }
  }
  return handler
}

export interface RpcExchangeOptions<R> {
  /** Spans named `<spanPrefix>.<tag>` (as `RpcServer` names them) when true. */
  readonly tracing: boolean
  readonly spanPrefix?: string
  /**
   * What the route answers itself rather than as the RPC's answer: read from a failed exit,
   * it becomes the exchange's failure (later messages are not run, no answer is sent).
   */
  readonly refusal?: (cause: Cause.Cause<unknown>) => R | undefined
}

/** The HTTP app answering `group` one request at a time; needs the group's handlers and middleware. */
export const make = <Rpcs extends Rpc.Any, R = never>(
  // Schemas that need services would need them per request; the groups served here need none.
  group: [Rpc.Context<Rpcs>] extends [never] ? RpcGroup.RpcGroup<Rpcs> : never,
  options: RpcExchangeOptions<R>
): Effect.Effect<HttpApp.Default<R>, never, RpcSerialization.RpcSerialization | Rpc.ToHandler<Rpcs> | Rpc.Middleware<Rpcs>> =>
  Effect.gen(function* () {
    const serialization = yield* RpcSerialization.RpcSerialization
    if (serialization.includesFraming) return yield* Effect.dieMessage("an RPC exchange needs an unframed serialization")
    // The unframed serializations keep no state between messages: one parser serves every exchange.
    const parser = serialization.unsafeMake()
    const context = yield* Effect.context<never>()
    const spanPrefix = options.spanPrefix ?? "RpcServer"
    let nextClientId = 0

    const schemasOf = new Map<string, Schemas>()
    for (const rpc of group.requests.values() as Iterable<Rpc.AnyWithProps>) {
      if (RpcSchema.isStreamSchema(rpc.successSchema)) return yield* Effect.dieMessage(`${rpc._tag} streams: serve it on a framed protocol`)
      // The group's schemas need no services (see `make`): decoding and encoding are synchronous.
      schemasOf.set(rpc._tag, {
        decode: Schema.decodeUnknownEither(rpc.payloadSchema as Schema.Schema<unknown, unknown>),
        encodeExit: Schema.encodeUnknownEither(Rpc.exitSchema(rpc as unknown as Rpc.Any) as Schema.Schema<unknown, unknown>),
        encodeDefect: Schema.encodeUnknownEither(rpc.defectSchema as Schema.Schema<unknown, unknown>)
      })
    }

    const exit = (requestId: string, exit: unknown): RpcMessage.FromServerEncoded => ({ _tag: "Exit", requestId, exit }) as RpcMessage.FromServerEncoded
    const defect = (message: string): RpcMessage.FromServerEncoded => ({ _tag: "Defect", defect: encodeAnyDefect(message) })

    /** A defect answering one request, when its payload does not decode or its exit does not encode. */
    const requestDefect = (requestId: string, schemas: Schemas, cause: string): RpcMessage.FromServerEncoded => {
      const encoded = schemas.encodeDefect(cause)
      return Either.isRight(encoded) ? exit(requestId, { _tag: "Failure", cause: { _tag: "Die", defect: encoded.right } }) : defect(cause)
    }

    const answer = (request: RpcMessage.RequestEncoded, httpHeaders: Readonly<Record<string, string>>): Effect.Effect<RpcMessage.FromServerEncoded, R> => {
      const rpc = group.requests.get(request.tag) as Rpc.AnyWithProps | undefined
      const entry = rpc && (context.unsafeMap.get(rpc.key) as Rpc.Handler<string> | undefined)
      if (rpc === undefined || entry === undefined) return Effect.succeed(defect(`Unknown request tag: ${request.tag}`))
      const schemas = schemasOf.get(rpc._tag)!
      const requestId = request.id
      const payload = schemas.decode(request.payload)
      if (Either.isLeft(payload)) return Effect.succeed(requestDefect(requestId, schemas, ParseResult.TreeFormatter.formatErrorSync(payload.left)))
      // The HTTP request's headers, then the message's own (as `RpcServer`'s HTTP protocol merges them).
      const headers = Headers.fromInput([...Object.entries(httpHeaders), ...request.headers])
      const clientId = nextClientId++
      const result = entry.handler(payload.right, { clientId, headers })
      const handler = (Rpc.isWrapper(result) ? result.value : result) as Effect.Effect<unknown, unknown, unknown>
      let run = Effect.exit(Effect.interruptible(withMiddleware(rpc, context, clientId, payload.right, headers, handler)))
      if (options.tracing) run = Effect.withSpan(run, `${spanPrefix}.${request.tag}`, { captureStackTrace: false, attributes: { requestId } })
      // The handlers' requirements are met by the request's context (the gate's principal, the route's services).
      return Effect.flatMap(run as Effect.Effect<Exit.Exit<unknown, unknown>>, (outcome) => {
        const refused = Exit.isFailure(outcome) && options.refusal !== undefined ? options.refusal(outcome.cause) : undefined
        if (refused !== undefined) return Effect.fail(refused)
        const encoded = schemas.encodeExit(outcome)
        return Effect.succeed(
          Either.isRight(encoded) ? exit(requestId, encoded.right) : requestDefect(requestId, schemas, ParseResult.TreeFormatter.formatErrorSync(encoded.left))
        )
      })
    }

    const respond = (responses: ReadonlyArray<RpcMessage.FromServerEncoded>) =>
      HttpServerResponse.text(parser.encode(responses) as string, { contentType: serialization.contentType })

    const httpApp: HttpApp.Default<R> = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      // As the gate's envelope check parsed them, else from the body.
      const parsed = yield* Effect.serviceOption(ParsedEnvelope)
      let messages: ReadonlyArray<RpcMessage.FromClientEncoded>
      if (Option.isSome(parsed)) messages = parsed.value as ReadonlyArray<RpcMessage.FromClientEncoded>
      else {
        const data = yield* Effect.orDie<string, HttpServerError.RequestError, never>(bodyText(request))
        try {
          messages = parser.decode(data) as ReadonlyArray<RpcMessage.FromClientEncoded>
        } catch (cause) {
          return respond([RpcMessage.ResponseDefectEncoded(cause)])
        }
      }
      const responses: Array<RpcMessage.FromServerEncoded> = []
      for (const message of messages) {
        switch (message._tag) {
          case "Request":
            responses.push(yield* answer(message, request.headers))
            break
          case "Ping":
            responses.push(RpcMessage.constPong)
            break
          // Acks, interrupts and the end of input concern RPCs still running; within one request none are.
          default:
            break
        }
      }
      return respond(responses)
    })

    return httpApp
  })

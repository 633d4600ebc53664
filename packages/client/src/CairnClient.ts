/**
 * `CairnClient`: the typed data plane (`DataRpcs`, sent as `DataRpcsWire`: the server decodes) over HTTP with a bearer token. Public
 * errors arrive as the eight domain errors; front refusals (token, size, time, overload)
 * and server failures as `TransportError`s — never as defects.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { RpcClient, RpcSerialization } from "@effect/rpc"
import { dataRpcPath } from "@cairn/domain/DataRpcPath"
import { DataRpcsWire } from "@cairn/domain/DataRpcs"
import { type DescribeRequest, type DescribeResult } from "@cairn/domain/Describe"
import { FrontErrorBody } from "@cairn/domain/FrontError"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { type PublicError } from "@cairn/domain/PublicError"
import { latest } from "@cairn/domain/Position"
import { type QueryRequest, type QueryResult } from "@cairn/domain/Query"
import { type Receipt } from "@cairn/domain/Receipt"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { fromFrontError, isTransportError, ServerFailure, type TransportError } from "./TransportError.js"

export type Token = string | Redacted.Redacted<string>

export interface CairnClientOptions {
  /** The deployment's base URL, e.g. `http://127.0.0.1:8787`. */
  readonly baseUrl: string
  /** An access token for the resource `{baseUrl}/db`, or an effect yielding the current one (refreshed tokens). */
  readonly token: Token | Effect.Effect<Token>
}

export interface CairnClientShape {
  readonly describe: (request: DescribeRequest) => Effect.Effect<DescribeResult, PublicError | TransportError>
  readonly query: (request: QueryRequest) => Effect.Effect<QueryResult, PublicError | TransportError>
  /** Invokes one operation; reuse the same `invocationId` to retry the same intent. The server decodes it (any case). */
  readonly mutate: (request: typeof MutateRequest.Encoded) => Effect.Effect<Receipt, PublicError | TransportError>
}

const decodeFrontError = Schema.decodeUnknown(FrontErrorBody)

/** Non-2xx answers are front refusals: decode their JSON body into the typed error. */
const refusal = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.flatMap(Effect.option(Effect.flatMap(response.json, decodeFrontError)), (body) =>
    Effect.fail(fromFrontError(response.status, Option.getOrUndefined(body)))
  )

const transformClient =
  (token: CairnClientOptions["token"]) =>
  <E, R>(client: HttpClient.HttpClient.With<E, R>): HttpClient.HttpClient.With<E, R> =>
    client.pipe(
      HttpClient.mapRequestEffect((request) =>
        Effect.map(Effect.isEffect(token) ? token : Effect.succeed(token), (t) => HttpClientRequest.bearerToken(request, t))
      ),
      HttpClient.transformResponse(
        Effect.flatMap((response) => (response.status >= 200 && response.status < 300 ? Effect.succeed(response) : refusal(response)))
      )
      // The RPC protocol wraps whatever the HTTP client fails with; `run` below unwraps it.
    ) as unknown as HttpClient.HttpClient.With<E, R>

const make = Effect.gen(function* () {
  const rpc = yield* RpcClient.make(DataRpcsWire)
  const run = <A>(effect: Effect.Effect<A, PublicError | RpcClientErrorLike>): Effect.Effect<A, PublicError | TransportError> =>
    effect.pipe(
      Effect.catchIf(
        (error): error is RpcClientErrorLike => error._tag === "RpcClientError",
        (error) =>
          Effect.fail(
            isTransportError(error.cause) ? error.cause : new ServerFailure({ message: `The server could not be reached: ${error.message}.` })
          )
      ),
      // The server replaces its own failures with a message naming the log reference.
      Effect.catchAllDefect((defect) =>
        Effect.fail(
          new ServerFailure({ message: typeof defect === "string" ? defect : "The server answered with a failure this client cannot read." })
        )
      )
    )
  /**
   * Read your writes across servers: the latest position this client has seen (a receipt's, a
   * page's basis) goes with each query as `atLeast` unless the request names its own, so a
   * query after a mutate never reads a copy older than that mutate, whichever server answers.
   */
  let seen: string | undefined
  const see = (position: string | undefined) => Effect.sync(() => (seen = latest(seen, position)))
  return CairnClient.of({
    describe: (request) => run(rpc.Describe(request)),
    query: (request) =>
      run(rpc.Query(request.atLeast === undefined && seen !== undefined ? { ...request, atLeast: seen } : request)).pipe(
        Effect.tap((result) => see(result.basis.position))
      ),
    mutate: (request) => run(rpc.Mutate(request)).pipe(Effect.tap((receipt) => see(receipt.position)))
  })
})

interface RpcClientErrorLike {
  readonly _tag: "RpcClientError"
  readonly message: string
  readonly cause?: unknown
}

export class CairnClient extends Context.Tag("@cairn/client/CairnClient")<CairnClient, CairnClientShape>() {
  /** A client over the given `HttpClient`. */
  static readonly layer = (options: CairnClientOptions): Layer.Layer<CairnClient, never, HttpClient.HttpClient> =>
    Layer.scoped(CairnClient, make).pipe(
      Layer.provide(
        RpcClient.layerProtocolHttp({
          url: options.baseUrl.replace(/\/+$/, "") + dataRpcPath,
          transformClient: transformClient(options.token)
        })
      ),
      Layer.provide(RpcSerialization.layerJson)
    )

  /** A client over the platform's `fetch`. */
  static readonly layerFetch = (options: CairnClientOptions): Layer.Layer<CairnClient> =>
    CairnClient.layer(options).pipe(Layer.provide(FetchHttpClient.layer))
}

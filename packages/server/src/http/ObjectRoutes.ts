/**
 * Files under `/db/objects`, behind the same bearer gate as the rest of `/db`:
 * `POST /db/objects` streams an upload (body = the bytes, `Content-Type` its type,
 * `X-File-Name` its percent-encoded name) and answers an upload handle;
 * `GET /db/objects/:objectId` downloads (Range, ETag = sha256) while the caller can see
 * a record holding the file; `POST /db/objects/:objectId/link` answers a short-lived
 * signed link, usable without a token (e.g. `<img src>`), that re-checks the policy for
 * its principal when used. Every request is a verb of the one engine (`DataPlane`: scope, the
 * caller's database, the policy view, then the file engine); the route only maps its answers to HTTP.
 */
import { HttpLayerRouter, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { type Principal } from "@cairn/domain/Principal"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Layer, Option, Stream } from "effect"
import { BearerGate } from "./BearerGate.js"
import { Correlation } from "../engine/Correlation.js"
import { type CorsRoute, objectsCors, resumableCors } from "./CorsOrigins.js"
import { frontError } from "../internal/frontError.js"
import { methodNotAllowed, refuseOtherMethods } from "./MethodNotAllowed.js"
import { DataPlane, type FileVerbError } from "../engine/DataPlane.js"
import { CurrentTransport } from "../engine/EngineMetrics.js"
import { fileHttpStatusOf } from "../engine/Refusal.js"
import { resumablePath } from "../engine/ResumableUploads.js"

export const objectsPath = "/db/objects"

/** `Content-Disposition` for any name: an ASCII fallback and the exact name in RFC 8187 form. */
export const contentDisposition = (name: string): string => {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, "_")
  const exact = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return `attachment; filename="${ascii}"; filename*=UTF-8''${exact}`
}

const decodeName = (raw: string | undefined): string | undefined => {
  if (raw === undefined) return undefined
  try {
    return decodeURIComponent(raw)
  } catch {
    return "\u0000" // refused by the engine as a bad name
  }
}

const routes = Effect.gen(function* () {
  const gate = yield* BearerGate
  const plane = yield* DataPlane
  const router = yield* HttpLayerRouter.HttpRouter

  /** The engine's answer in HTTP: the gate's for a refusal (scope, unavailable, failure), else the file's status. */
  const refuse = (principal: Principal, error: FileVerbError) =>
    Effect.gen(function* () {
      if (error._tag === "InsufficientScope" || error._tag === "Unavailable" || error._tag === "InternalFailure") return yield* gate.refuse("db", principal, error)
      const requestId = yield* Correlation.id
      if (error._tag === "Inaccessible") return frontError(404, { error: "not_found", message: error.message, requestId })
      const { status, error: code } = fileHttpStatusOf(error)
      // RFC 9110 §15.5.17: a 416 names the representation's length, so a client can ask for a range that exists.
      const headers: Record<string, string> = error.fileBytes !== undefined ? { "content-range": `bytes */${error.fileBytes}` } : {}
      return frontError(status, { error: code, message: error.message, requestId, ...(error.limitBytes !== undefined ? { limitBytes: error.limitBytes } : {}) }, headers)
    })

  /** Authenticates, runs `f` as the caller, and answers refusals; CORS as for every `/db` route, preflights for `cors`. */
  const gated =
    (
      f: (principal: Principal, request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, FileVerbError>,
      cors: CorsRoute = objectsCors
    ) =>
    (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function* () {
        const preflight = request.method === "OPTIONS" ? yield* gate.preflight(request, cors) : undefined
        if (preflight !== undefined) return preflight
        const admitted = yield* Effect.either(gate.authenticate(request, "db"))
        if (admitted._tag === "Left") return HttpServerResponse.setHeaders(admitted.left, gate.cors(request))
        const principal = admitted.right
        const response = yield* Effect.catchAll(f(principal, request), (refusal) => refuse(principal, refusal)).pipe(Effect.provideService(CurrentTransport, "files"))
        return HttpServerResponse.setHeaders(response, gate.cors(request))
      })

  const upload = gated((principal, request) =>
    Effect.gen(function* () {
      const length = request.headers["content-length"]
      const uploaded = yield* plane.upload(principal, {
        // The body streams to storage: the front's body cap does not apply, the object limits do.
        // Read straight from Node's request (its async iterator), one chunk per step.
        body: Stream.fromAsyncIterable(NodeHttpServerRequest.toIncomingMessage(request) as AsyncIterable<Uint8Array>, (cause) => cause),
        contentType: request.headers["content-type"],
        name: decodeName(request.headers["x-file-name"]),
        declaredLength: length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined
      })
      return HttpServerResponse.unsafeJson(uploaded, { status: 201, headers: { "cache-control": "no-store" } })
    }).pipe(HttpServerRequest.withMaxBodySize(Option.none()))
  )

  const download = (principal: Principal, request: HttpServerRequest.HttpServerRequest, objectId: string) =>
    Effect.scoped(
      Effect.gen(function* () {
        const found = yield* plane.download(principal, objectId, request.headers["range"])
        const { file, range } = found
        const etag = `"${file.sha256}"`
        const headers: Record<string, string> = {
          etag,
          "accept-ranges": "bytes",
          "cache-control": "private, no-cache",
          "content-disposition": contentDisposition(file.name),
          "x-content-type-options": "nosniff",
          "content-security-policy": "sandbox; default-src 'none'"
        }
        if (request.headers["if-none-match"] === etag) {
          found.body.destroy()
          return HttpServerResponse.empty({ status: 304, headers })
        }
        if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${file.size}`
        return HttpServerResponse.raw(found.body, {
          status: range ? 206 : 200,
          contentType: file.contentType,
          contentLength: range ? range.end - range.start + 1 : file.size,
          headers
        })
      })
    )

  const get = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function* () {
      const { objectId } = yield* HttpRouter.params
      const id = objectId ?? ""
      const link = new URL(request.url, "http://localhost").searchParams.get("link")
      if (link === null) return yield* gated((principal, req) => download(principal, req, id))(request)
      // A signed link stands for its principal: the policy is checked for them now.
      return yield* plane.linkPrincipal(id, link).pipe(
        Effect.flatMap((principal) => Effect.catchAll(download(principal, request, id), (refusal) => refuse(principal, refusal))),
        Effect.catchAll((refusal) => Effect.map(Correlation.id, (requestId) => frontError(404, { error: "not_found", message: refusal.message, requestId }))),
        Effect.provideService(CurrentTransport, "files")
      )
    })

  const link = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.flatMap(HttpRouter.params, ({ objectId }) =>
      gated((principal) =>
        Effect.map(plane.link(principal, objectId ?? ""), (answer) => HttpServerResponse.unsafeJson(answer, { headers: { "cache-control": "no-store" } }))
      )(request)
    )

  const tus = gated((principal, request) =>
    Effect.gen(function* () {
      // An unreadable request never reaches the engine: the protocol's own 400.
      const web = yield* Effect.either(HttpServerRequest.toWeb(request))
      if (web._tag === "Left") return HttpServerResponse.text("The request could not be read.\n", { status: 400 })
      return HttpServerResponse.fromWeb(yield* plane.resumable(principal, web.right))
    }).pipe(HttpServerRequest.withMaxBodySize(Option.none())),
    resumableCors
  )

  yield* router.add("*", resumablePath, tus)
  yield* router.add("*", `${resumablePath}/:uploadId`, tus)
  yield* router.add("POST", objectsPath, upload)
  yield* router.add("GET", `${objectsPath}/:objectId`, get)
  yield* router.add("POST", `${objectsPath}/:objectId/link`, link)
  // Any other method: a preflight, or (behind the gate) 405 with what the path takes.
  const otherwise = (answer: ReturnType<typeof methodNotAllowed>) => gated((_, request) => answer(request))
  yield* refuseOtherMethods(router, objectsPath, ["POST"], otherwise)
  yield* refuseOtherMethods(router, `${objectsPath}/:objectId`, ["GET"], otherwise)
  yield* refuseOtherMethods(router, `${objectsPath}/:objectId/link`, ["POST"], otherwise)
})

/** The `/db/objects` routes. Needs the `BearerGate` and the `DataPlane`. */
export const ObjectRoutes = Layer.scopedDiscard(routes)

/**
 * Resumable uploads over the TUS 1.0 protocol (`@tus/server`), under
 * `/db/objects/resumable`, for large files over unreliable links: create an upload
 * (`Upload-Length`, `Upload-Metadata` with `filename` and `filetype`), send it in PATCHes
 * from the offset a HEAD reports, and the last PATCH answers the same JSON as a plain
 * upload (the upload handle) once the bytes are stored (sha256 computed, fsynced, limits
 * and quota applied). Partial uploads live per database (`<dataDir>/uploads/<database
 * id>`), are reachable only by their creator, and expire with the upload handle TTL.
 *
 * The journey of one upload, and why nothing escapes:
 * 1. Create: the type, name and size are checked and the declared bytes promised against the
 *    database's quota (with the unfinished ones) before tus writes anything; a refusal leaves
 *    nothing on disk.
 * 2. PATCH: tus appends to the partial file under its own per-upload lock; a deferred-length
 *    upload is granted, per request, at most the room the quota has left.
 * 3. Finish: the partial file is read lazily, by a stream whose errors are the upload's own (a
 *    refusal before reading never opens it), stored, and removed whatever the outcome; the
 *    promise turns into stored bytes or is released.
 * 4. After every request the promise is settled against what is on disk (released once the
 *    upload is gone: finished, cancelled or expired by the collector, which walks every database's
 *    folder).
 */
import { randomBytes } from "node:crypto"
import { createReadStream } from "node:fs"
import { join } from "node:path"
import type { Server } from "@tus/server"
import { type Principal } from "@cairn/domain/Principal"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Duration, Effect, Runtime } from "effect"
import { isOwnedBy, ownedUploadId } from "./FileQuota.js"
import { commonJs } from "../internal/commonJs.js"
import { type FileError, type ResumableUpload, type UploadRequest, type Uploaded } from "./Objects.js"
import { type ObjectLimitsShape } from "./ObjectLimits.js"
import { fileHttpStatusOf } from "./Refusal.js"

/** What the protocol needs of the file engine (`Objects`). */
export interface ResumableEngine {
  readonly limits: ObjectLimitsShape
  readonly upload: (databaseId: string, request: UploadRequest) => Effect.Effect<Uploaded, FileError>
  readonly createResumable: (databaseId: string, uploadId: string, subject: string, upload: ResumableUpload) => Effect.Effect<void, FileError>
  readonly grantResumable: (databaseId: string, uploadId: string | null) => Effect.Effect<number, FileError>
  readonly settleResumable: (databaseId: string, uploadId: string) => Effect.Effect<void>
  readonly enterUploadArea: (databaseId: string) => { readonly directory: string; readonly leave: () => void }
}

/** A refusal as tus answers one: its status and plain words. */
const tusRefusal = (error: FileError) => ({
  status_code: error._tag === "FileRefused" ? fileHttpStatusOf(error).status : error._tag === "Inaccessible" ? 404 : 503,
  body: `${error.message}\n`
})

export const resumablePath = "/db/objects/resumable"

/** The tus server, its file store and lock, loaded with the first resumable upload (not at every start). */
type Tus = {
  readonly Server: typeof import("@tus/server").Server
  readonly FileStore: typeof import("@tus/file-store").FileStore
  readonly MemoryLocker: typeof import("@tus/server").MemoryLocker
}
let tus: Promise<Tus> | undefined
const loadTus = () =>
  (tus ??= Promise.all([import("@tus/server"), import("@tus/file-store")]).then(([server, store]) => {
    // The file store makes its folder from its constructor with a callback that throws on failure (an
    // uncaught exception: every tenant down). The engine makes the folder before each request instead.
    class FileStore extends commonJs(store).FileStore {}
    Object.defineProperty(FileStore.prototype, "checkOrCreateDirectory", { value: () => undefined })
    return { Server: commonJs(server).Server, MemoryLocker: commonJs(server).MemoryLocker, FileStore }
  }))

/** The tus server's own answer for an upload it does not have. */
const uploadNotFound = { status_code: 404, body: "The file for this url was not found\n" }

const decodeMetadata = (value: string | null | undefined): string | undefined => (value === null || value === undefined ? undefined : value)

/** The id of the upload a request names, if any. */
const uploadIdOf = (url: string): string | null => {
  const path = new URL(url, "http://localhost").pathname
  return path.startsWith(`${resumablePath}/`) ? path.slice(resumablePath.length + 1) : null
}

export interface Resumable {
  /** Answers one TUS request of `principal`, whose database is `databaseId`. */
  readonly handle: (principal: Principal, databaseId: string, request: Request) => Promise<Response>
}

const tusAnswer = (status: number, body: string) => new Response(body, { status, headers: { "tus-resumable": "1.0.0", "content-type": "text/plain; charset=utf-8" } })

export const makeResumable = (options: {
  readonly dataDir: string
  readonly objects: ResumableEngine
  readonly runtime: Runtime.Runtime<never>
}): Resumable => {
  const { objects } = options
  const run = Runtime.runPromise(options.runtime)
  /** Runs an engine step; its refusal becomes the tus answer (plain text with its status, as tus answers). */
  const step = async <A>(effect: Effect.Effect<A, FileError>): Promise<A> => {
    const result = await run(Effect.either(effect))
    if (result._tag === "Left") throw tusRefusal(result.left)
    return result.right
  }
  // One lock for every request on an upload, whichever request's server instance holds it.
  let locker: InstanceType<Tus["MemoryLocker"]> | undefined

  /** A tus server for one request of `principal` in database `databaseId` (cheap to make: the lock is shared). */
  const serverFor = async (principal: Principal, databaseId: string, directory: string, created: { id?: string }): Promise<Server> => {
    const { FileStore, MemoryLocker, Server } = await loadTus()
    locker ??= new MemoryLocker()
    const datastore = new FileStore({ directory, expirationPeriodInMilliseconds: Duration.toMillis(objects.limits.uploadTtl) })
    /** A deferred-length creation's grant, from `maxSize` (asked first) to `onUploadCreate`. */
    let granted = 0
    return new Server({
      path: resumablePath,
      datastore,
      locker,
      relativeLocation: true,
      respectForwardedHeaders: false,
      maxSize: async (req, id) => {
        if (req.method === "POST") {
          if (req.headers.get("upload-length") !== null) return objects.limits.maxObjectBytes
          granted = await step(objects.grantResumable(databaseId, null))
          return granted
        }
        return id === null ? objects.limits.maxObjectBytes : await step(objects.grantResumable(databaseId, id))
      },
      namingFunction: () => (created.id = ownedUploadId(randomBytes(16).toString("hex"), principal.subject)),
      onIncomingRequest: async (_req, id) => {
        if (!isOwnedBy(id, principal.subject)) throw uploadNotFound
      },
      onUploadCreate: async (_req, upload) => {
        await step(
          objects.createResumable(databaseId, upload.id, principal.subject, {
            contentType: decodeMetadata(upload.metadata?.["filetype"]),
            name: decodeMetadata(upload.metadata?.["filename"]),
            size: upload.size,
            granted
          })
        )
        return {}
      },
      onUploadFinish: async (_req, upload) => {
        const path = join(directory, upload.id)
        const stored = await run(
          Effect.either(
            objects.upload(databaseId, {
              // Opened only when the engine reads it (a refusal before never opens it); its errors are the upload's.
              body: NodeStream.fromReadable(() => createReadStream(path, { highWaterMark: 256 * 1024 }), (cause) => cause),
              contentType: decodeMetadata(upload.metadata?.["filetype"]),
              name: decodeMetadata(upload.metadata?.["filename"]),
              declaredLength: upload.size,
              reservation: upload.id
            })
          )
        )
        // Stored (or refused): the partial upload has served its purpose either way.
        await datastore.remove(upload.id).catch(() => undefined)
        if (stored._tag === "Left") throw tusRefusal(stored.left)
        return { status_code: 200, headers: { "content-type": "application/json", "cache-control": "no-store" }, body: JSON.stringify(stored.right) }
      }
    })
  }

  return {
    handle: async (principal, databaseId, request) => {
      // TUS 1.0: a PATCH body is application/offset+octet-stream, anything else is 415 Unsupported Media Type.
      if (request.method === "PATCH" && request.headers.get("content-type")?.split(";")[0]!.trim().toLowerCase() !== "application/offset+octet-stream") {
        return tusAnswer(415, "The body of a PATCH must be sent as application/offset+octet-stream.\n")
      }
      let area: { readonly directory: string; readonly leave: () => void }
      try {
        area = objects.enterUploadArea(databaseId)
      } catch (cause) {
        await run(Effect.logError("the resumable upload folder could not be made", cause))
        return tusAnswer(503, "File storage is unavailable right now. Retry later.\n")
      }
      const { directory } = area
      const created: { id?: string } = {}
      const named = uploadIdOf(request.url)
      try {
        const init: RequestInit & { duplex: "half" } = {
          method: request.method,
          headers: request.headers,
          body: request.method === "GET" || request.method === "HEAD" ? null : request.body,
          duplex: "half",
          signal: request.signal
        }
        const answer = await (await serverFor(principal, databaseId, directory, created)).handleWeb(new Request(request.url, init))
        // CORS is the gate's to grant, per route and only to allowed origins: tus's own grant (any origin) goes.
        const headers = new Headers()
        answer.headers.forEach((value, name) => {
          if (!name.startsWith("access-control-")) headers.set(name, value)
        })
        return new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers })
      } finally {
        try {
          const id = created.id ?? named
          if (id !== null && request.method !== "HEAD" && request.method !== "OPTIONS" && request.method !== "GET" && isOwnedBy(id, principal.subject)) {
            await run(objects.settleResumable(databaseId, id))
          }
        } finally {
          area.leave()
        }
      }
    }
  }
}

/**
 * Resumable uploads over the TUS 1.0 protocol (`@tus/server`), under
 * `/db/objects/resumable`, for large files over unreliable links: create an upload
 * (`Upload-Length`, `Upload-Metadata` with `filename` and `filetype`), send it in PATCHes
 * from the offset a HEAD reports, and the last PATCH answers the same JSON as a plain
 * upload (the upload handle) once the bytes are stored (sha256 computed, fsynced, limits
 * and quota applied). Partial uploads live per database (`<dataDir>/uploads/<database
 * id>`), are reachable only from that database, and expire with the upload handle TTL.
 */
import { createHash, randomBytes } from "node:crypto"
import { createReadStream } from "node:fs"
import { join } from "node:path"
import type { Server } from "@tus/server"
import { type Principal } from "@cairn/domain/Principal"
import { Duration, Effect, Runtime, Stream } from "effect"
import { commonJs } from "./internal/commonJs.js"
import { type ObjectLimitsShape } from "./ObjectLimits.js"
import { type Objects } from "./Objects.js"

export const resumablePath = "/db/objects/resumable"

/** The tus server and its file store, loaded with the first resumable upload (not at every start). */
let tus: Promise<{ readonly Server: typeof import("@tus/server").Server; readonly FileStore: typeof import("@tus/file-store").FileStore }> | undefined
const loadTus = () =>
  (tus ??= Promise.all([import("@tus/server"), import("@tus/file-store")]).then(([server, store]) => ({
    Server: commonJs(server).Server,
    FileStore: commonJs(store).FileStore
  })))

/** The request header carrying the verified caller into the protocol's hooks (set by us, never by the client). */
const contextHeader = "x-cairn-upload-context"

/**
 * An upload's id names its creator: 32 random hex characters, then 32 of
 * sha256(random, subject). Every request on it (HEAD, PATCH, DELETE) must come from the same
 * subject, or it is answered as an upload that does not exist: within a database, another
 * caller holding the URL can neither see its progress, write into it, finish it (and take its
 * handle) nor cancel it. No state is kept: a partial upload resumes after a restart.
 */
const ownedId = (random: string, subject: string) => random + createHash("sha256").update(`${random}\0${subject}`).digest("hex").slice(0, 32)
const isOwnedBy = (id: string, subject: string) => id.length === 64 && ownedId(id.slice(0, 32), subject) === id
/** The tus server's own answer for an upload it does not have. */
const uploadNotFound = { status_code: 404, body: "The file for this url was not found\n" }

const decodeMetadata = (value: string | null | undefined): string | undefined => (value === null || value === undefined ? undefined : value)

export interface Resumable {
  /** Answers one TUS request of `principal`, whose database is `databaseId`. */
  readonly handle: (principal: Principal, databaseId: string, request: Request) => Promise<Response>
  /** Removes expired partial uploads of every database served since startup. */
  readonly expire: Effect.Effect<number>
}

export const makeResumable = (options: {
  readonly dataDir: string
  readonly limits: ObjectLimitsShape
  readonly objects: Objects
  readonly runtime: Runtime.Runtime<never>
}): Resumable => {
  const callers = new Map<string, Principal>()
  const servers = new Map<string, Promise<Server>>()

  const callerOf = (req: { readonly headers: Headers }): Principal => {
    const principal = callers.get(req.headers.get(contextHeader) ?? "")
    if (principal === undefined) throw { status_code: 404, body: "Not found\n" }
    return principal
  }

  const serverFor = (databaseId: string): Promise<Server> => {
    let server = servers.get(databaseId)
    if (server === undefined) {
      server = makeServer(databaseId)
      servers.set(databaseId, server)
    }
    return server
  }

  const makeServer = async (databaseId: string): Promise<Server> => {
    const { FileStore, Server } = await loadTus()
    const datastore = new FileStore({
      directory: join(options.dataDir, "uploads", databaseId),
      expirationPeriodInMilliseconds: Duration.toMillis(options.limits.uploadTtl)
    })
    return new Server({
      path: resumablePath,
      datastore,
      relativeLocation: true,
      respectForwardedHeaders: false,
      maxSize: options.limits.maxObjectBytes,
      namingFunction: (req) => ownedId(randomBytes(16).toString("hex"), callerOf(req).subject),
      onIncomingRequest: async (req, id) => {
        if (!isOwnedBy(id, callerOf(req).subject)) throw uploadNotFound
      },
      onUploadCreate: async (_req, upload) => {
        const type = decodeMetadata(upload.metadata?.["filetype"])
        const name = decodeMetadata(upload.metadata?.["filename"])
        if (type !== undefined && !/^[\x20-\x7e]{1,255}$/.test(type)) throw { status_code: 415, body: "The filetype is not a content type.\n" }
        if (name !== undefined && (name.length === 0 || name.length > 255 || /[\u0000-\u001f\u007f/\\]/.test(name))) {
          throw { status_code: 400, body: "The filename must be 1 to 255 characters, without control characters or slashes.\n" }
        }
        return {}
      },
      onUploadFinish: async (req, upload) => {
        const principal = callerOf(req)
        const path = join(options.dataDir, "uploads", databaseId, upload.id)
        const stored = await Runtime.runPromise(options.runtime)(
          Effect.either(
            options.objects.upload(principal, {
              body: Stream.fromAsyncIterable(createReadStream(path, { highWaterMark: 256 * 1024 }) as AsyncIterable<Uint8Array>, (e) => e),
              contentType: decodeMetadata(upload.metadata?.["filetype"]),
              name: decodeMetadata(upload.metadata?.["filename"]),
              declaredLength: upload.size
            })
          )
        )
        // Stored (or refused): the partial upload has served its purpose either way.
        await datastore.remove(upload.id).catch(() => undefined)
        if (stored._tag === "Left") throw { status_code: stored.left.status, body: `${stored.left.message}\n` }
        return { status_code: 200, headers: { "content-type": "application/json", "cache-control": "no-store" }, body: JSON.stringify(stored.right) }
      }
    })
  }

  return {
    handle: async (principal, databaseId, request) => {
      const token = randomBytes(16).toString("hex")
      const headers = new Headers(request.headers)
      headers.set(contextHeader, token)
      callers.set(token, principal)
      try {
        const init: RequestInit & { duplex: "half" } = {
          method: request.method,
          headers,
          body: request.method === "GET" || request.method === "HEAD" ? null : request.body,
          duplex: "half",
          signal: request.signal
        }
        return await (await serverFor(databaseId)).handleWeb(new Request(request.url, init))
      } finally {
        callers.delete(token)
      }
    },
    expire: Effect.promise(() =>
      Promise.all([...servers.values()].map((server) => server.then((s) => s.cleanUpExpiredUploads()).catch(() => 0))).then((counts) =>
        counts.reduce((a, b) => a + b, 0)
      )
    )
  }
}

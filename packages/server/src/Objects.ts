/**
 * The engine of stored files, shared by every transport: uploads into the caller's
 * database (answering a short-lived upload handle), resolution of handles when an
 * operation attaches them, downloads allowed only while the caller can see a record that
 * references the object (checked against the current policy at every request, signed
 * links included), and collection of objects no record references any more.
 */
import { randomUUID } from "node:crypto"
import type { Readable } from "node:stream"
import { Sealer } from "@cairn/catalog/Sealer"
import { type CompiledOperation } from "@cairn/catalog/Catalog"
import { File } from "@cairn/catalog"
import { type View } from "@cairn/catalog/View"
import { readScope, writeScope } from "@cairn/domain/AccessScope"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { InvalidInput } from "@cairn/domain/PublicError"
import { scopeSql } from "@cairn/query/ScopeSql"
import { type Database, Databases } from "@cairn/store/Databases"
import { referencedObjects } from "@cairn/store/ObjectReferences"
import { type Blob, ObjectStore, type ObjectStoreError, type Range, TooLarge } from "@cairn/store/ObjectStore"
import { Clock, Data, Duration, Effect, Metric, Option, Schedule, Schema, Stream } from "effect"
import { DatabasesLive } from "./DatabasesLive.js"
import { Deployment } from "./Deployment.js"
import { ObjectLimits } from "./ObjectLimits.js"
import { ObjectStoreLive } from "./ObjectStoreLive.js"
import { missingScope } from "./Refusal.js"
import { Settings } from "./Settings.js"

/** What an upload, a download or a link request is refused with: an HTTP status, a front error code and public words. */
export class FileRefusal extends Data.TaggedError("FileRefusal")<{
  readonly status: 400 | 403 | 404 | 413 | 415 | 416 | 503
  readonly error: "invalid_request" | "insufficient_scope" | "payload_too_large" | "not_found" | "unavailable"
  readonly message: string
  readonly limitBytes?: number
  /** `insufficient_scope`: the scope the call needs. */
  readonly scope?: string
}> {}

/** The one answer for a file the caller cannot download: absent, another database's, or only in records hidden from them. */
export const noSuchFile = new FileRefusal({
  status: 404,
  error: "not_found",
  message: "No file you can see has this id. Query the record that holds it for a current download url."
})

const UploadHandle = Schema.Struct({
  /** The database it may be attached in. */
  d: Schema.String,
  o: Schema.String,
  h: File.Sha256,
  n: Schema.Int,
  t: Schema.String,
  f: Schema.String,
  /** Expiry, ms since the epoch. */
  e: Schema.Number
})

const SignedLink = Schema.Struct({
  s: Schema.String,
  r: Schema.Array(Schema.String),
  c: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  sc: Schema.Array(Schema.String),
  k: Schema.String,
  o: Schema.String,
  e: Schema.Number
})

export interface UploadRequest {
  readonly body: Stream.Stream<Uint8Array, unknown>
  readonly contentType: string | undefined
  readonly name: string | undefined
  readonly declaredLength: number | undefined
}

export interface Uploaded {
  readonly handle: string
  readonly objectId: string
  readonly sha256: string
  readonly size: number
  readonly contentType: string
  readonly name: string
  readonly expiresAt: string
}

export interface Download {
  readonly file: File.FileRef
  /** The bytes, or the requested range of them. */
  readonly body: Readable
  readonly range: Range | undefined
}

export const uploads = Metric.counter("cairn_object_uploads_total", { description: "Object uploads, by outcome" })
export const downloads = Metric.counter("cairn_object_downloads_total", { description: "Object downloads, by outcome" })
export const storedBytes = Metric.gauge("cairn_object_stored_bytes", { description: "Bytes of objects stored, by database (opaque id)" })
export const storageFaults = Metric.counter("cairn_object_storage_faults_total", { description: "Object storage failures" })

const CONTENT_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/
// Control characters and path separators are never part of a stored name.
const BAD_NAME = /[\u0000-\u001f\u007f/\\]/

/** A single `bytes=` range of a `size`-byte object: the range, `undefined` for none, or `"unsatisfiable"`. */
export const parseRange = (header: string | undefined, size: number): Range | undefined | "unsatisfiable" => {
  if (header === undefined) return undefined
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim())
  // Multiple or malformed ranges: serve the whole object, as RFC 9110 allows.
  if (match === null || (match[1] === "" && match[2] === "")) return undefined
  if (match[1] === "") {
    const suffix = Number(match[2])
    if (suffix === 0 || size === 0) return "unsatisfiable"
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(match[1])
  const end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1)
  if (start >= size || end < start) return "unsatisfiable"
  return { start, end }
}

export class Objects extends Effect.Service<Objects>()("@cairn/server/Objects", {
  scoped: Effect.gen(function* () {
    const { catalog, policy } = yield* Deployment
    const databases = yield* Databases
    const store = yield* ObjectStore
    const sealer = yield* Sealer
    const limits = yield* ObjectLimits
    const { dataDir } = yield* Settings

    const fault = (error: unknown) =>
      Effect.zipRight(
        Effect.zipRight(Metric.increment(storageFaults), Effect.logError("object storage failed", error)),
        Effect.fail(new FileRefusal({ status: 503, error: "unavailable", message: "File storage is unavailable right now. Retry later." }))
      )

    const needScope = (principal: Principal, scope: string) =>
      principal.scopes.includes(scope)
        ? Effect.void
        : Effect.fail(
            new FileRefusal({
              status: 403,
              error: "insufficient_scope",
              scope,
              message: missingScope(scope)
            })
          )

    const acceptsType = (contentType: string) =>
      CONTENT_TYPE.test(contentType) &&
      limits.contentTypes.some((allowed) =>
        allowed === "*" || allowed === contentType || (allowed.endsWith("/*") && contentType.startsWith(allowed.slice(0, -1)))
      )

    const usedBytes = (id: string) => Effect.map(store.list(id), (blobs) => blobs.reduce((n, b) => n + b.size, 0))
    /** Per database: bytes received by uploads in flight, and bytes stored since startup (so concurrent uploads share one quota). */
    const inFlight = new Map<string, number>()
    const storedSinceStart = new Map<string, number>()

    /** Stores the bytes of `request` in database `id` under every limit: its file's metadata. */
    const storeBytes = (id: string, request: UploadRequest) =>
      Effect.gen(function* () {
        const contentType = (request.contentType ?? "application/octet-stream").split(";")[0]!.trim().toLowerCase()
        if (!acceptsType(contentType)) {
          return yield* new FileRefusal({
            status: 415,
            error: "invalid_request",
            message: `Files of type "${contentType.slice(0, 100)}" are not accepted here. Accepted: ${limits.contentTypes.join(", ")}.`
          })
        }
        const name = request.name ?? "file"
        if (name.length === 0 || name.length > 255 || BAD_NAME.test(name)) {
          return yield* new FileRefusal({
            status: 400,
            error: "invalid_request",
            message: "The file name must be 1 to 255 characters, without control characters or slashes."
          })
        }
        const used = yield* Effect.catchAll(usedBytes(id), fault)
        const room = Math.min(limits.maxObjectBytes, limits.quotaBytes - used)
        const tooLarge = (limit: number) =>
          new FileRefusal({
            status: 413,
            error: "payload_too_large",
            limitBytes: Math.max(0, limit),
            message:
              limit < limits.maxObjectBytes
                ? `This file does not fit in your database's file storage quota (${limits.quotaBytes} bytes); ${Math.max(0, limit)} bytes are free. Delete records holding files you no longer need.`
                : `The file is larger than the limit of ${limits.maxObjectBytes} bytes.`
          })
        if (room <= 0 || (request.declaredLength !== undefined && request.declaredLength > room)) return yield* tooLarge(room)
        // Counted chunk by chunk against the quota together with every other upload in flight to this database.
        const storedAtStart = storedSinceStart.get(id) ?? 0
        let mine = 0
        const counted = request.body.pipe(
          Stream.mapEffect((chunk) => {
            const others = (inFlight.get(id) ?? 0) - mine
            const storedMeanwhile = (storedSinceStart.get(id) ?? 0) - storedAtStart
            const next = mine + chunk.byteLength
            if (used + storedMeanwhile + others + next > limits.quotaBytes) return Effect.fail(new TooLarge({ limit: Math.max(0, limits.quotaBytes - used - storedMeanwhile - others) }))
            inFlight.set(id, others + next)
            mine = next
            return Effect.succeed(chunk)
          })
        )
        const release = Effect.sync(() => inFlight.set(id, (inFlight.get(id) ?? 0) - mine))
        const blob = yield* store.put(id, counted, room).pipe(
          Effect.tap((stored) => Effect.sync(() => storedSinceStart.set(id, (storedSinceStart.get(id) ?? 0) + stored.size))),
          Effect.ensuring(release),
          Effect.catchAll((error) =>
            error instanceof TooLarge
              ? Effect.fail(tooLarge(Math.min(room, error.limit)))
              : typeof error === "object" && error !== null && "_tag" in error && error._tag === "ObjectStoreError"
                ? fault(error)
                : Effect.fail(new FileRefusal({ status: 400, error: "invalid_request", message: "The upload was cut off before its end." }))
          )
        )
        yield* Metric.set(Metric.tagged(storedBytes, "database", id), used + blob.size)
        return { blob, contentType, name }
      })

    const upload = (principal: Principal, request: UploadRequest): Effect.Effect<Uploaded, FileRefusal> =>
      Effect.scoped(Effect.gen(function* () {
        yield* needScope(principal, writeScope)
        // The database exists before any of its objects: collection reads references from its file.
        const id = (yield* open(principal)).id
        const { blob, contentType, name } = yield* storeBytes(id, request)
        const now = yield* Clock.currentTimeMillis
        const expires = now + Duration.toMillis(limits.uploadTtl)
        const objectId = randomUUID()
        const handle = sealer.seal("upload", UploadHandle, { d: id, o: objectId, h: blob.sha256, n: blob.size, t: contentType, f: name, e: expires })
        return { handle, objectId, sha256: blob.sha256, size: blob.size, contentType, name, expiresAt: new Date(expires).toISOString() }
      })).pipe(
        Effect.tapBoth({
          onFailure: (refusal) => Metric.increment(Metric.tagged(uploads, "outcome", refusal.error)),
          onSuccess: () => Metric.increment(Metric.tagged(uploads, "outcome", "ok"))
        }),
        Effect.withSpan("Objects.upload")
      )

    /** The upload fields of `operation`'s decoded input, each handle swapped for the file it names in `database`. */
    const resolve = (database: Database, operation: CompiledOperation, input: unknown): Effect.Effect<unknown, InvalidInput> =>
      Effect.gen(function* () {
        const fields = File.uploadFields(operation.input)
        if (fields.length === 0 || typeof input !== "object" || input === null) return input
        const now = yield* Clock.currentTimeMillis
        const resolved: Record<string, unknown> = { ...(input as Record<string, unknown>) }
        for (const field of fields) {
          const value = resolved[field]
          if (value === undefined || value === null) continue
          const invalid = new InvalidInput({
            message: `input.${field} is not an upload handle of your database that is still valid: upload the file again (POST /db/objects) and pass the new handle.`,
            issues: [{ path: `/input/${field}`, message: "is not a valid upload handle" }]
          })
          if (typeof value === "object") {
            // A small file inline: stored now, in this database, under the same limits as an upload.
            const inline = value as File.InlineFile
            const bytes = /^[A-Za-z0-9+/]*={0,2}$/.test(inline.base64) ? Buffer.from(inline.base64, "base64") : undefined
            if (bytes === undefined || bytes.length > limits.inlineMaxBytes) {
              return yield* new InvalidInput({
                message: `input.${field}.base64 must be the file's bytes in base64, at most ${limits.inlineMaxBytes} bytes; upload larger files with POST /db/objects and pass the handle.`,
                issues: [{ path: `/input/${field}/base64`, message: "is not base64 within the inline limit" }]
              })
            }
            const stored = yield* storeBytes(database.id, { body: Stream.make(new Uint8Array(bytes)), contentType: inline.contentType, name: inline.name, declaredLength: bytes.length }).pipe(
              Effect.catchAll((refusal) =>
                refusal.status === 503
                  ? Effect.die(refusal)
                  : Effect.fail(new InvalidInput({ message: `input.${field}: ${refusal.message}`, issues: [{ path: `/input/${field}`, message: "is refused" }] }))
              )
            )
            yield* Metric.increment(Metric.tagged(uploads, "outcome", "inline"))
            resolved[field] = { objectId: randomUUID(), sha256: stored.blob.sha256, size: stored.blob.size, contentType: stored.contentType, name: stored.name } satisfies File.FileRef
            continue
          }
          const opened = typeof value === "string" ? sealer.open("upload", UploadHandle, value) : Option.none()
          if (Option.isNone(opened) || opened.value.d !== database.id || opened.value.e <= now) return yield* invalid
          const handle = opened.value
          // The bytes were durable before the handle was issued; they are kept at least as long as it is valid.
          const blob = yield* Effect.orDie(store.stat(database.id, handle.h))
          if (Option.isNone(blob)) return yield* invalid
          const file: File.FileRef = { objectId: handle.o, sha256: handle.h, size: handle.n, contentType: handle.t, name: handle.f }
          resolved[field] = file
        }
        return resolved
      })

    /** The file `objectId` as one of the records `view` shows holds it, if any. */
    const visibleFile = (view: View, database: Database, objectId: string) =>
      Effect.gen(function* () {
        if (!/^[0-9a-f-]{36}$/.test(objectId)) return Option.none<File.FileRef>()
        const sql = database.reader
        for (const entity of view.entities()) {
          for (const field of view.fields(entity)) {
            if (!field.file) continue
            const rows = yield* sql<{ f: string }>`SELECT r.${sql(field.name)} AS f FROM ${sql(entity.name)} AS r WHERE json_extract(r.${sql(
              field.name
            )}, '$.objectId') = ${objectId} AND ${scopeSql(view, entity.name, "r")} LIMIT 1`
            if (rows.length > 0) return Option.some(JSON.parse(rows[0]!.f) as File.FileRef)
          }
        }
        return Option.none<File.FileRef>()
      }).pipe(Effect.orDie)

    const open = (principal: Principal) =>
      Effect.catchAll(databases.activate(principal.databaseKey), (error) => fault(error))

    const download = (principal: Principal, objectId: string, rangeHeader: string | undefined): Effect.Effect<Download, FileRefusal, import("effect/Scope").Scope> =>
      Effect.gen(function* () {
        yield* needScope(principal, readScope)
        const database = yield* open(principal)
        const found = yield* visibleFile(policy.view(principal), database, objectId)
        if (Option.isNone(found)) return yield* noSuchFile
        const file = found.value
        const blob: Option.Option<Blob> = yield* Effect.catchAll(store.stat(database.id, file.sha256), fault)
        // A referenced object whose bytes are gone is a storage fault, never a silent 404.
        if (Option.isNone(blob)) return yield* fault(new Error("a referenced object is missing"))
        const range = parseRange(rangeHeader, file.size)
        if (range === "unsatisfiable") {
          return yield* new FileRefusal({ status: 416, error: "invalid_request", message: `The range is outside the file's ${file.size} bytes.` })
        }
        const body = yield* Effect.catchAll(store.read(database.id, file.sha256, range), fault)
        return { file, range, body }
      }).pipe(
        Effect.tapBoth({
          onFailure: (refusal) => Metric.increment(Metric.tagged(downloads, "outcome", refusal.error)),
          onSuccess: () => Metric.increment(Metric.tagged(downloads, "outcome", "ok"))
        }),
        Effect.withSpan("Objects.download")
      )

    /** A signed link to `objectId` for the caller, if they can see it now; using it re-checks the policy for them. */
    const link = (principal: Principal, objectId: string): Effect.Effect<{ url: string; expiresAt: string }, FileRefusal, import("effect/Scope").Scope> =>
      Effect.gen(function* () {
        yield* needScope(principal, readScope)
        const database = yield* open(principal)
        if (Option.isNone(yield* visibleFile(policy.view(principal), database, objectId))) return yield* noSuchFile
        const expires = (yield* Clock.currentTimeMillis) + Duration.toMillis(limits.linkTtl)
        const sealed = sealer.seal("file-link", SignedLink, {
          s: principal.subject,
          r: principal.roles,
          c: principal.claims,
          sc: principal.scopes,
          k: principal.databaseKey,
          o: objectId,
          e: expires
        })
        return { url: `${File.downloadPath(objectId)}?link=${sealed}`, expiresAt: new Date(expires).toISOString() }
      })

    /** The principal a signed link for `objectId` stands for, while it is valid. */
    const linkPrincipal = (objectId: string, sealed: string): Effect.Effect<Principal, FileRefusal> =>
      Effect.gen(function* () {
        const opened = sealer.open("file-link", SignedLink, sealed)
        const now = yield* Clock.currentTimeMillis
        if (Option.isNone(opened) || opened.value.o !== objectId || opened.value.e <= now) return yield* noSuchFile
        const p = opened.value
        return new Principal({ subject: p.s, roles: p.r, claims: p.c, scopes: p.sc, databaseKey: DatabaseKey.make(p.k) })
      })

    /**
     * Removes the objects of one database no record references: those unreferenced for
     * longer than the retention window past an upload handle's life. A referenced blob's
     * clock is restarted on every pass, so the window counts from its release. Nothing is
     * removed when the references cannot be read (or the database file is missing).
     */
    const collect = (id: string): Effect.Effect<number> =>
      Effect.gen(function* () {
        // Partial uploads a crash left behind: none can still be completing after the handle TTL.
        yield* store.sweep(id, (yield* Clock.currentTimeMillis) - Duration.toMillis(limits.uploadTtl))
        const referenced = yield* referencedObjects(dataDir, id, catalog)
        if (Option.isNone(referenced)) return 0
        const now = yield* Clock.currentTimeMillis
        const keep = Duration.toMillis(limits.uploadTtl) + Duration.toMillis(limits.retention)
        let removed = 0
        let bytes = 0
        for (const blob of yield* store.list(id)) {
          if (referenced.value.has(blob.sha256)) {
            bytes += blob.size
            yield* store.touch(id, blob.sha256)
          } else if (now - blob.touchedAt > keep) {
            yield* store.remove(id, blob.sha256)
            removed++
          } else bytes += blob.size
        }
        yield* Metric.set(Metric.tagged(storedBytes, "database", id), bytes)
        return removed
      }).pipe(
        Effect.catchAllCause((cause) => Effect.as(Effect.zipRight(Metric.increment(storageFaults), Effect.logError("object collection failed", cause)), 0)),
        Effect.withSpan("Objects.collect")
      )

    /** One pass over every database with stored objects. */
    const collectAll = Effect.flatMap(Effect.orElseSucceed(store.databases, () => []), (ids) => Effect.forEach(ids, collect)).pipe(
      Effect.map((counts) => counts.reduce((a, b) => a + b, 0))
    )

    // The collector, on the operator's schedule.
    yield* Effect.forkScoped(Effect.schedule(collectAll, Schedule.spaced(limits.collectEvery)))

    return { upload, resolve, download, link, linkPrincipal, collect: collectAll, limits } as const
  }),
  dependencies: [DatabasesLive, ObjectStoreLive, ObjectLimits.layerConfig]
}) {}

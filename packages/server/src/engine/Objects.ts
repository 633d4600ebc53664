/**
 * The engine of stored files, shared by every transport: uploads into the caller's
 * database (answering a short-lived upload handle), resolution of handles when an
 * operation attaches them, downloads allowed only while the caller can see a record that
 * references the object (checked against the current policy at every request, signed
 * links included), and collection of objects no record references any more.
 */
import { type ReadableDatabase } from "@cairn/store/Database"
import { randomUUID } from "node:crypto"
import { mkdirSync } from "node:fs"
import type { Readable } from "node:stream"
import { Sealer } from "@cairn/catalog/Sealer"
import { type CompiledOperation } from "@cairn/catalog/Catalog"
import { File } from "@cairn/catalog"
import { type View } from "@cairn/catalog/View"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { Inaccessible, InvalidInput } from "@cairn/domain/PublicError"
import { scopeSql } from "@cairn/query/ScopeSql"
import { isArchiveNamespace } from "@cairn/store/Archive"
import { type Database } from "@cairn/store/Databases"
import { referencedObjects } from "@cairn/store/ObjectReferences"
import { type Blob, ObjectStore, type Range, storedBytesByDatabase } from "@cairn/store/ObjectStore"
import { Chunk, Clock, Data, Deferred, Duration, Effect, FiberId, Metric, Option, Schedule, Schema, Stream } from "effect"
import { Deployment } from "./Deployment.js"
import { FileQuota, overQuotaMessage, type QuotaRefusal, tooManyUnfinishedMessage } from "./FileQuota.js"
import { readPartial, readPartials, sweepUploads, uploadDirectory, uploadsRoot } from "../internal/uploadArea.js"
import { ObjectLimits } from "./ObjectLimits.js"
import { ObjectStoreLive } from "./ObjectStoreLive.js"
import { makeResumable } from "./ResumableUploads.js"
import { FileRefused, fileHttpStatusOf, Unavailable } from "./Refusal.js"
import { Settings } from "../operations/Settings.js"

/** The one answer for a file the caller cannot download: absent, another database's, or only in records hidden from them. */
export const noSuchFile = new Inaccessible({
  message: "No file you can see has this id. Query the record that holds it for a current download url."
})

/** What a file verb fails with: the engine's vocabulary, worded for HTTP by the route (`fileHttpStatusOf`). */
export type FileError = FileRefused | Inaccessible | Unavailable

/** The metric outcome of a refusal. */
const outcomeOf = (error: FileError) => (error._tag === "FileRefused" ? fileHttpStatusOf(error).error : error._tag === "Inaccessible" ? "not_found" : "unavailable")

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
  /** The resumable upload (its id) whose bytes these are: they were promised against the quota when it was created. */
  readonly reservation?: string
}

/** A resumable upload as it is created: its metadata, and its declared size or (deferred) the bytes granted to its first request. */
export interface ResumableUpload {
  readonly contentType: string | undefined
  readonly name: string | undefined
  readonly size: number | undefined
  readonly granted: number
}

/** A body went past what the quota could promise it (internal: answered as the quota refusal). */
class OverQuota extends Data.TaggedError("OverQuota")<{ readonly refusal: QuotaRefusal }> {}

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
// One series for the deployment: a label per database would be one series per tenant (unbounded). Per-tenant
// sizes are `ObjectStore.storedBytesByDatabase`, read on demand (the operator's listing), never scraped.
export const storedBytes = Metric.gauge("cairn_object_stored_bytes", { description: "Bytes of objects stored, all databases together (after de-duplication within each)" })
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
    const { catalog } = yield* Deployment
    const store = yield* ObjectStore
    const sealer = yield* Sealer
    const limits = yield* ObjectLimits
    const { dataDir } = yield* Settings

    /** The stored bytes of each database this process counted (loaded, uploaded into or collected): the gauge is their sum. */
    const storedByDatabase = new Map<string, number>()
    let storedTotal = 0
    const setStored = (id: string, bytes: number) =>
      Effect.suspend(() => {
        storedTotal += bytes - (storedByDatabase.get(id) ?? 0)
        storedByDatabase.set(id, bytes)
        return Metric.set(storedBytes, storedTotal)
      })

    const fault = (error: unknown) =>
      Effect.zipRight(
        Effect.zipRight(Metric.increment(storageFaults), Effect.logError("object storage failed", error)),
        Effect.fail(new Unavailable({ message: "File storage is unavailable right now. Retry later." }))
      )

    const acceptsType = (contentType: string) =>
      CONTENT_TYPE.test(contentType) &&
      limits.contentTypes.some((allowed) =>
        allowed === "*" || allowed === contentType || (allowed.endsWith("/*") && contentType.startsWith(allowed.slice(0, -1)))
      )

    /** A file's type and name as stored, or why they are refused: the same rule for a plain, inline or resumable upload. */
    const fileMetadata = (rawType: string | undefined, rawName: string | undefined) => {
      const contentType = (rawType ?? "application/octet-stream").split(";")[0]!.trim().toLowerCase()
      if (!acceptsType(contentType)) {
        return Effect.fail(
          new FileRefused({
            reason: "type",
            message: `Files of type "${contentType.slice(0, 100)}" are not accepted here. Accepted: ${limits.contentTypes.join(", ")}.`
          })
        )
      }
      const name = rawName ?? "file"
      if (name.length === 0 || name.length > 255 || BAD_NAME.test(name)) {
        return Effect.fail(
          new FileRefused({ reason: "name", message: "The file name must be 1 to 255 characters, without control characters or slashes." })
        )
      }
      return Effect.succeed({ contentType, name })
    }

    const tooLarge = new FileRefused({
      reason: "size",
      limitBytes: limits.maxObjectBytes,
      message: `The file is larger than the limit of ${limits.maxObjectBytes} bytes.`
    })
    const refusalOf = (refusal: QuotaRefusal) =>
      refusal._tag === "OverQuota"
        ? new FileRefused({ reason: "quota", limitBytes: refusal.quotaBytes, message: overQuotaMessage(refusal.quotaBytes) })
        : new FileRefused({ reason: "unfinished", message: tooManyUnfinishedMessage(refusal) })

    /**
     * Per database, its quota ledger: loaded from storage on first use after start (stored objects,
     * partial uploads left on disk), then kept as uploads come and go. One small value per database
     * that stored or uploaded files since start.
     */
    const ledgers = new Map<string, Deferred.Deferred<FileQuota, Unavailable>>()
    const bounds = { quotaBytes: limits.quotaBytes, unfinishedPerPrincipal: limits.unfinishedPerPrincipal, unfinishedPerDatabase: limits.unfinishedPerDatabase }
    const loadLedger = (id: string) =>
      Effect.gen(function* () {
        const blobs = yield* store.list(id)
        const partials = yield* Effect.tryPromise(() => readPartials(uploadDirectory(dataDir, id)))
        const quota = new FileQuota(blobs.reduce((n, b) => n + b.size, 0), bounds)
        for (const partial of partials) quota.restore(partial.id, partial.size ?? partial.offset, partial.size === undefined)
        yield* setStored(id, quota.stored)
        return quota
      }).pipe(Effect.catchAll(fault))
    const ledgerOf = (id: string): Effect.Effect<FileQuota, Unavailable> =>
      Effect.suspend(() => {
        const loading = ledgers.get(id)
        if (loading !== undefined) return Deferred.await(loading)
        const deferred = Deferred.unsafeMake<FileQuota, Unavailable>(FiberId.none)
        ledgers.set(id, deferred)
        return Effect.uninterruptible(
          Effect.flatMap(Effect.exit(loadLedger(id)), (exit) => {
            // A failed load is tried again by the next upload.
            if (exit._tag === "Failure") ledgers.delete(id)
            return Effect.zipRight(Deferred.done(deferred, exit), exit)
          })
        )
      })
    /** The ledger of `id` if one was loaded (or is loading): collection and expiry change only what a ledger counts. */
    const loadedLedger = (id: string): Effect.Effect<Option.Option<FileQuota>> =>
      Effect.suspend(() => {
        const loading = ledgers.get(id)
        return loading === undefined ? Effect.succeedNone : Effect.option(Deferred.await(loading))
      })

    /**
     * Stores the bytes of `request` in database `id` under every limit: its file's metadata. The
     * bytes are promised in the quota ledger before they are stored (a resumable upload's were
     * promised at its creation, under `reservation`), and handed from promised to stored in one step.
     */
    const storeBytes = (id: string, request: UploadRequest) =>
      Effect.gen(function* () {
        const { contentType, name } = yield* fileMetadata(request.contentType, request.name)
        if (request.declaredLength !== undefined && request.declaredLength > limits.maxObjectBytes) return yield* tooLarge
        const quota = yield* ledgerOf(id)
        const key = request.reservation ?? randomUUID()
        const declared = request.declaredLength ?? 0
        // A resumable upload's bytes were promised at its creation; the quota may have been lowered since.
        const refused =
          request.reservation !== undefined && !quota.withinQuota()
            ? ({ _tag: "OverQuota", quotaBytes: limits.quotaBytes } as const)
            : declared > quota.bytesOf(key)
              ? quota.reserve(key, declared, { resumable: quota.has(key) })
              : undefined
        if (refused !== undefined) {
          if (request.reservation === undefined) quota.release(key)
          return yield* refusalOf(refused)
        }
        // A body longer than it said, or of no declared length, is promised chunk by chunk.
        let received = 0
        const counted = request.body.pipe(
          Stream.mapChunksEffect((chunks) => {
            received += Chunk.reduce(chunks, 0, (n, chunk) => n + chunk.byteLength)
            const over = received > quota.bytesOf(key) ? quota.reserve(key, received, { resumable: quota.has(key) && request.reservation !== undefined }) : undefined
            return over === undefined ? Effect.succeed(chunks) : Effect.fail(new OverQuota({ refusal: over }))
          })
        )
        const blob = yield* store.put(id, counted, limits.maxObjectBytes).pipe(
          Effect.tap((stored) =>
            Effect.sync(() => {
              // From promised to stored in one step: no decision sees the bytes twice or not at all.
              if (stored.added) quota.addStored(stored.size)
              quota.release(key)
            })
          ),
          Effect.onError(() => Effect.sync(() => quota.release(key))),
          Effect.catchAll((error): Effect.Effect<never, FileRefused | Unavailable> => {
            const tag = typeof error === "object" && error !== null && "_tag" in error ? error._tag : undefined
            if (tag === "TooLarge") return Effect.fail(tooLarge)
            if (tag === "OverQuota") return Effect.fail(refusalOf((error as OverQuota).refusal))
            if (tag === "ObjectStoreError") return fault(error)
            return Effect.fail(new FileRefused({ reason: "incomplete", message: "The upload was cut off before its end." }))
          })
        )
        yield* setStored(id, quota.stored)
        return { blob, contentType, name }
      })

    /**
     * A resumable upload's creation: its type and name, its size within the object limit, and its
     * declared bytes (or, deferred, the bytes `grant` gave its first request) promised against the
     * quota, within the bounds on unfinished uploads.
     */
    const createResumable = (databaseId: string, uploadId: string, subject: string, upload: ResumableUpload) =>
      Effect.gen(function* () {
        yield* fileMetadata(upload.contentType, upload.name)
        if (upload.size !== undefined && upload.size > limits.maxObjectBytes) return yield* tooLarge
        const quota = yield* ledgerOf(databaseId)
        const refused = quota.reserve(uploadId, upload.size ?? upload.granted, { resumable: true, deferred: upload.size === undefined, subject })
        if (refused !== undefined) return yield* refusalOf(refused)
      })

    /**
     * The most bytes a resumable upload may reach with this request: for one of deferred length, its
     * bytes so far and all the room the quota has left, promised now (settled after the request);
     * a declared upload's bytes were promised when it was created.
     */
    const grantResumable = (databaseId: string, uploadId: string | null) =>
      Effect.flatMap(ledgerOf(databaseId), (quota) => {
        // A declared upload's bytes were promised at creation; one the ledger does not know, tus answers as missing.
        if (uploadId !== null && !quota.isDeferred(uploadId)) return Effect.succeed(limits.maxObjectBytes)
        const held = uploadId === null ? 0 : quota.bytesOf(uploadId)
        const room = Math.min(Math.max(0, limits.maxObjectBytes - held), quota.free())
        // No room at all is refused here: tus reads a limit of 0 as "no limit".
        if (room === 0) return Effect.fail(refusalOf({ _tag: "OverQuota", quotaBytes: limits.quotaBytes }))
        if (uploadId !== null) quota.reserve(uploadId, held + room, { resumable: true })
        return Effect.succeed(held + room)
      })

    /** Requests working in each database's upload folder now; the collector leaves a folder in use. */
    const areaUsers = new Map<string, number>()
    /**
     * Marks the database's upload folder in use and makes it if missing (throws if it cannot be made);
     * `leave` ends the use. The collector never removes a folder in use.
     */
    const enterUploadArea = (databaseId: string): { readonly directory: string; readonly leave: () => void } => {
      const directory = uploadDirectory(dataDir, databaseId)
      areaUsers.set(databaseId, (areaUsers.get(databaseId) ?? 0) + 1)
      let left = false
      const leave = () => {
        if (left) return
        left = true
        const users = (areaUsers.get(databaseId) ?? 1) - 1
        if (users === 0) areaUsers.delete(databaseId)
        else areaUsers.set(databaseId, users)
      }
      try {
        mkdirSync(directory, { recursive: true })
      } catch (error) {
        leave()
        throw error
      }
      return { directory, leave }
    }

    /** After a request on a resumable upload: its promise becomes what is on disk (released when it is gone). */
    const settleResumable = (databaseId: string, uploadId: string) =>
      Effect.gen(function* () {
        const quota = yield* ledgerOf(databaseId)
        const partial = yield* Effect.tryPromise(() => readPartial(uploadDirectory(dataDir, databaseId), uploadId))
        if (partial === undefined) quota.release(uploadId)
        else quota.restore(uploadId, partial.size ?? partial.offset, partial.size === undefined)
      }).pipe(Effect.catchAll(fault), Effect.ignore)

    /** Stores an upload in database `id` (open for the call: collection reads references from its file) and answers its handle. */
    const upload = (id: string, request: UploadRequest): Effect.Effect<Uploaded, FileError> =>
      Effect.gen(function* () {
        const { blob, contentType, name } = yield* storeBytes(id, request)
        const now = yield* Clock.currentTimeMillis
        const expires = now + Duration.toMillis(limits.uploadTtl)
        const objectId = randomUUID()
        const handle = sealer.seal("upload", UploadHandle, { d: id, o: objectId, h: blob.sha256, n: blob.size, t: contentType, f: name, e: expires })
        return { handle, objectId, sha256: blob.sha256, size: blob.size, contentType, name, expiresAt: new Date(expires).toISOString() }
      }).pipe(
        Effect.tapBoth({
          onFailure: (refusal) => Metric.increment(Metric.tagged(uploads, "outcome", outcomeOf(refusal))),
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
                refusal._tag === "Unavailable"
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
    const visibleFile = (view: View, database: ReadableDatabase, objectId: string) =>
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

    /** The file `objectId` for a caller whose policy view is `view`, in their open `database`: its bytes, or the `Range` of them. */
    const download = (view: View, database: ReadableDatabase, objectId: string, rangeHeader: string | undefined): Effect.Effect<Download, FileError> =>
      Effect.gen(function* () {
        const found = yield* visibleFile(view, database, objectId)
        if (Option.isNone(found)) return yield* noSuchFile
        const file = found.value
        const blob: Option.Option<Blob> = yield* Effect.catchAll(store.stat(database.id, file.sha256), fault)
        // A referenced object whose bytes are gone is a storage fault, never a silent 404.
        if (Option.isNone(blob)) return yield* fault(new Error("a referenced object is missing"))
        const range = parseRange(rangeHeader, file.size)
        if (range === "unsatisfiable") {
          return yield* new FileRefused({ reason: "range", fileBytes: file.size, message: `The range is outside the file's ${file.size} bytes.` })
        }
        const body = yield* Effect.catchAll(store.read(database.id, file.sha256, range), fault)
        return { file, range, body }
      }).pipe(
        Effect.tapBoth({
          onFailure: (refusal) => Metric.increment(Metric.tagged(downloads, "outcome", outcomeOf(refusal))),
          onSuccess: () => Metric.increment(Metric.tagged(downloads, "outcome", "ok"))
        }),
        Effect.withSpan("Objects.download")
      )

    /** A signed link (sealed: principal, object, expiry) to `objectId`; using it re-checks the policy for `principal`. */
    const sealLink = (principal: Principal, objectId: string, now: number) => {
      const expires = now + Duration.toMillis(limits.linkTtl)
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
    }

    /** A signed link to `objectId` for the caller, if their view of `database` shows it now. */
    const link = (principal: Principal, view: View, database: ReadableDatabase, objectId: string): Effect.Effect<{ url: string; expiresAt: string }, Inaccessible> =>
      Effect.gen(function* () {
        if (Option.isNone(yield* visibleFile(view, database, objectId))) return yield* noSuchFile
        return sealLink(principal, objectId, yield* Clock.currentTimeMillis)
      })

    /** The principal a signed link for `objectId` stands for, while it is valid. */
    const linkPrincipal = (objectId: string, sealed: string): Effect.Effect<Principal, Inaccessible> =>
      Effect.gen(function* () {
        const opened = sealer.open("file-link", SignedLink, sealed)
        const now = yield* Clock.currentTimeMillis
        if (Option.isNone(opened) || opened.value.o !== objectId || opened.value.e <= now) return yield* noSuchFile
        const p = opened.value
        return new Principal({ subject: p.s, roles: p.r, claims: p.c, scopes: p.sc, databaseKey: DatabaseKey.make(p.k) })
      })

    /**
     * Per database, when this process's collector first saw each stored blob unreferenced (ms): the marks
     * of mark and sweep, kept beside the store, never written into it. Only blobs awaiting collection
     * have one (a referenced blob's mark is dropped), so it stays as small as the garbage.
     */
    const unreferencedSince = new Map<string, Map<string, number>>()

    /**
     * Removes the objects of one database no record references: those unreferenced for longer than
     * the retention window past an upload handle's life, counted from the later of the blob's last
     * write (a re-upload restarts it: a handle is valid that long) and the pass that first saw it
     * unreferenced. A referenced blob is never written to: on S3, rewriting every live object each
     * pass made a new version of each in a versioned bucket. The marks live in memory, so a restart
     * only delays collection by one window. Nothing is removed when the references cannot be read
     * (or the database file is missing).
     */
    const collect = (id: string): Effect.Effect<number> =>
      Effect.gen(function* () {
        // Partial uploads a crash left behind: none can still be completing after the handle TTL.
        yield* store.sweep(id, (yield* Clock.currentTimeMillis) - Duration.toMillis(limits.uploadTtl))
        const quota = yield* loadedLedger(id)
        const referenced = yield* referencedObjects(dataDir, id, catalog)
        if (Option.isNone(referenced)) return 0
        const now = yield* Clock.currentTimeMillis
        const keep = Duration.toMillis(limits.uploadTtl) + Duration.toMillis(limits.retention)
        const previous = unreferencedSince.get(id)
        const marks = new Map<string, number>()
        let removed = 0
        let bytes = 0
        for (const blob of yield* store.list(id)) {
          if (referenced.value.has(blob.sha256)) {
            bytes += blob.size
            continue
          }
          const since = previous?.get(blob.sha256) ?? now
          if (now - Math.max(since, blob.touchedAt) > keep) {
            yield* store.remove(id, blob.sha256)
            if (Option.isSome(quota)) quota.value.addStored(-blob.size)
            removed++
          } else {
            marks.set(blob.sha256, since)
            bytes += blob.size
          }
        }
        if (marks.size === 0) unreferencedSince.delete(id)
        else unreferencedSince.set(id, marks)
        yield* setStored(id, bytes)
        return removed
      }).pipe(
        Effect.catchAllCause((cause) => Effect.as(Effect.zipRight(Metric.increment(storageFaults), Effect.logError("object collection failed", cause)), 0)),
        Effect.withSpan("Objects.collect")
      )

    /**
     * Expired resumable uploads of every database, touched since start or not, go (one walk of the
     * upload folders); what a loaded ledger promised them is released.
     */
    const expireUploads = Effect.gen(function* () {
      const before = (yield* Clock.currentTimeMillis) - Duration.toMillis(limits.uploadTtl)
      const removed = yield* Effect.tryPromise(() => sweepUploads(uploadsRoot(dataDir), before, (id) => (areaUsers.get(id) ?? 0) > 0))
      for (const [id, uploadIds] of removed) {
        const quota = yield* loadedLedger(id)
        if (Option.isSome(quota)) for (const uploadId of uploadIds) quota.value.release(uploadId)
      }
      return [...removed.values()].reduce((n, ids) => n + ids.length, 0)
    }).pipe(
      Effect.catchAllCause((cause) => Effect.as(Effect.zipRight(Metric.increment(storageFaults), Effect.logError("expiring resumable uploads failed", cause)), 0)),
      Effect.withSpan("Objects.expireUploads")
    )

    /** One pass over every database with stored objects, and over every database's unfinished uploads. */
    // The archive's blobs share the store (cluster mode) under namespaces of their own: never swept here.
    const collectAll = Effect.flatMap(Effect.orElseSucceed(store.databases, () => []), (ids) =>
      Effect.forEach(ids.filter((id) => !isArchiveNamespace(id)), collect)
    ).pipe(
      Effect.map((counts) => counts.reduce((a, b) => a + b, 0)),
      Effect.zipLeft(expireUploads)
    )

    // The collector, on the operator's schedule.
    yield* Effect.forkScoped(Effect.schedule(collectAll, Schedule.spaced(limits.collectEvery)))

    const resumable = makeResumable({
      dataDir,
      objects: { limits, upload, createResumable, grantResumable, settleResumable, enterUploadArea },
      runtime: yield* Effect.runtime<never>()
    })

    return {
      upload,
      resumable,
      resolve,
      download,
      link,
      sealLink,
      linkPrincipal,
      collect: collectAll,
      limits,
      createResumable,
      grantResumable,
      enterUploadArea,
      settleResumable,
      /**
       * The stored bytes of every database (opaque id), read from the store now: per-tenant sizes for the
       * operator (the `cairn_object_stored_bytes` metric is one series for the deployment).
       */
      storedBytesByDatabase: Effect.map(Effect.provideService(storedBytesByDatabase, ObjectStore, store), (sizes) =>
        new Map([...sizes].filter(([id]) => !isArchiveNamespace(id)))
      ),
      /** Unfinished and stored bytes as the ledger counts them (tests and metrics). */
      quotaOf: (databaseId: string) => Effect.map(ledgerOf(databaseId), (q) => ({ stored: q.stored, reserved: q.reserved, unfinished: q.unfinished }))
    } as const
  }),
  dependencies: [ObjectStoreLive, ObjectLimits.layerConfig]
}) {}

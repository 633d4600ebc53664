/**
 * Where file bytes live: one content-addressed area per database (a blob per sha256, so
 * identical uploads within a database are stored once; nothing is ever shared across
 * databases). Swappable infrastructure: the filesystem under the data directory is the
 * embedded default; an upload's bytes are fsynced before `put` answers.
 */
import { createHash, randomUUID } from "node:crypto"
import { closeSync, createReadStream, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeSync } from "node:fs"
import { join } from "node:path"
import type { Readable } from "node:stream"
import { Context, Data, Effect, Layer, Option, Stream } from "effect"
import { fsyncDirectory } from "./internal/files.js"
import { relieve } from "./internal/pressure.js"
import { StoreConfig } from "./StoreConfig.js"

/** The stored bytes of one object. */
export interface Blob {
  readonly sha256: string
  readonly size: number
  /** When the blob was last written or re-uploaded (ms since the epoch): garbage collection's clock. */
  readonly touchedAt: number
}

/** What `put` stored: the blob, and whether its bytes are new to the database (a duplicate takes no more room). */
export interface PutBlob extends Blob {
  readonly added: boolean
}

/** An upload stopped at `limit` bytes; nothing of it was kept. */
export class TooLarge extends Data.TaggedError("TooLarge")<{ readonly limit: number }> {}

/** A storage failure (disk, permissions, the remote store): logged, answered as unavailable. */
export class ObjectStoreError extends Data.TaggedError("ObjectStoreError")<{ readonly cause: unknown }> {}

/** An inclusive byte range. */
export interface Range {
  readonly start: number
  readonly end: number
}

export interface ObjectStoreShape {
  /**
   * Streams `body` into the database's area, hashing as it goes; stops with `TooLarge`
   * past `limit` bytes. When it answers, the blob is durable (written and fsynced).
   */
  readonly put: <E>(
    databaseId: string,
    body: Stream.Stream<Uint8Array, E>,
    limit: number
  ) => Effect.Effect<PutBlob, TooLarge | ObjectStoreError | E>
  readonly stat: (databaseId: string, sha256: string) => Effect.Effect<Option.Option<Blob>, ObjectStoreError>
  /**
   * The blob's bytes, or the inclusive `range` of them, as a Node stream (the HTTP front pipes
   * it to the socket with backpressure, without a per-chunk hop through an Effect stream).
   */
  readonly read: (databaseId: string, sha256: string, range?: Range) => Effect.Effect<Readable, ObjectStoreError>
  readonly list: (databaseId: string) => Effect.Effect<ReadonlyArray<Blob>, ObjectStoreError>
  readonly remove: (databaseId: string, sha256: string) => Effect.Effect<void, ObjectStoreError>
  /** Removes partial uploads (left by a crash) begun before `before` (ms since the epoch); answers how many. */
  readonly sweep: (databaseId: string, before: number) => Effect.Effect<number, ObjectStoreError>
  /** The databases that have an object area. */
  readonly databases: Effect.Effect<ReadonlyArray<string>, ObjectStoreError>
  /** Restarts a blob's retention clock (`touchedAt`): for a re-upload only (on S3 it writes a new version). */
  readonly touch: (databaseId: string, sha256: string) => Effect.Effect<void, ObjectStoreError>
}

export class ObjectStore extends Context.Tag("@cairn/store/ObjectStore")<ObjectStore, ObjectStoreShape>() {}

/** The bytes database `databaseId` stores (after de-duplication), read from the store now. */
export const storedBytesOf = (databaseId: string): Effect.Effect<number, ObjectStoreError, ObjectStore> =>
  Effect.flatMap(ObjectStore, (store) => Effect.map(store.list(databaseId), (blobs) => blobs.reduce((n, b) => n + b.size, 0)))

/**
 * The stored bytes of every database with an object area, by opaque database id: the operator's
 * per-tenant sizes (the metric is one aggregate series; a label per database would be unbounded).
 * Reads the store now, one listing per database; the archive's namespaces of a cluster are included.
 */
export const storedBytesByDatabase: Effect.Effect<ReadonlyMap<string, number>, ObjectStoreError, ObjectStore> = Effect.flatMap(ObjectStore, (store) =>
  Effect.flatMap(store.databases, (ids) =>
    Effect.map(
      Effect.forEach(ids, (id) => Effect.map(store.list(id), (blobs) => [id, blobs.reduce((n, b) => n + b.size, 0)] as const)),
      (entries) => new Map(entries)
    )
  )
)

/**
 * Writes `body` to the open file `fd` chunk by chunk as it arrives (nothing held beyond one
 * batch), hashing as it goes and bounding the garbage of streaming; stops with `TooLarge` past
 * `limit` bytes. Every backend stages an upload through this before storing it.
 */
export const writeHashed = <E>(
  fd: number,
  body: Stream.Stream<Uint8Array, E>,
  limit: number
): Effect.Effect<{ readonly sha256: string; readonly size: number }, TooLarge | ObjectStoreError | E> =>
  Effect.suspend(() => {
    const hash = createHash("sha256")
    let size = 0
    return Stream.runForEachChunk(body, (chunks): Effect.Effect<void, TooLarge | ObjectStoreError> =>
      Effect.suspend((): Effect.Effect<void, TooLarge | ObjectStoreError> => {
        for (const chunk of chunks) {
          if (size + chunk.byteLength > limit) return Effect.fail(new TooLarge({ limit }))
          try {
            relieve(size, size + chunk.byteLength)
            size += chunk.byteLength
            hash.update(chunk)
            let offset = 0
            while (offset < chunk.byteLength) offset += writeSync(fd, chunk, offset, chunk.byteLength - offset)
          } catch (cause) {
            return Effect.fail(new ObjectStoreError({ cause }))
          }
        }
        return Effect.void
      })
    ).pipe(Effect.map(() => ({ sha256: hash.digest("hex"), size })))
  })

const SHA256 = /^[0-9a-f]{64}$/
const ID = /^[A-Za-z0-9_-]{1,128}$/

/** The filesystem backend: `<root>/<databaseId>/<sha256>`, uploads staged in `<root>/<databaseId>/.staging`. */
export const makeFilesystem = (root: string): ObjectStoreShape => {
  const areaOf = (databaseId: string) => {
    // Ids are digests we made; anything else is a defect, never a path.
    if (!ID.test(databaseId)) throw new Error("not a database id")
    return join(root, databaseId)
  }
  const blobPath = (databaseId: string, sha256: string) => {
    if (!SHA256.test(sha256)) throw new Error("not a sha256")
    return join(areaOf(databaseId), sha256)
  }
  const attempt = <A>(f: () => A) => Effect.try({ try: f, catch: (cause) => new ObjectStoreError({ cause }) })

  const put = <E>(databaseId: string, body: Stream.Stream<Uint8Array, E>, limit: number): Effect.Effect<PutBlob, TooLarge | ObjectStoreError | E> =>
    Effect.acquireUseRelease(
      attempt(() => {
        const staging = join(areaOf(databaseId), ".staging")
        mkdirSync(staging, { recursive: true })
        const path = join(staging, randomUUID())
        return { path, fd: openSync(path, "wx"), open: true }
      }),
      (file) =>
        Effect.gen(function* () {
          const { sha256, size } = yield* writeHashed(file.fd, body, limit)
          return yield* attempt(() => {
            fsyncSync(file.fd)
            closeSync(file.fd)
            file.open = false
            const target = blobPath(databaseId, sha256)
            const existing = statOf(target)
            if (existing) {
              // De-duplicated: keep the stored bytes, restart their retention clock.
              rmSync(file.path, { force: true })
              const now = new Date()
              utimesSync(target, now, now)
              return { sha256, size, touchedAt: now.getTime(), added: false }
            }
            renameSync(file.path, target)
            fsyncDirectory(areaOf(databaseId))
            return { sha256, size, touchedAt: statSync(target).mtimeMs, added: true }
          })
        }),
      (file) =>
        Effect.sync(() => {
          if (file.open) closeSync(file.fd)
          rmSync(file.path, { force: true })
        })
    )

  const statOf = (path: string): Blob | undefined => {
    try {
      const s = statSync(path)
      return { sha256: path.slice(-64), size: s.size, touchedAt: s.mtimeMs }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
      throw error
    }
  }

  return {
    put,
    stat: (databaseId, sha256) => attempt(() => Option.fromNullable(statOf(blobPath(databaseId, sha256)))),
    read: (databaseId, sha256, range) =>
      attempt(() => {
        const stream = createReadStream(blobPath(databaseId, sha256), { highWaterMark: 256 * 1024, ...(range ? { start: range.start, end: range.end } : {}) })
        let sent = 0
        stream.on("data", (chunk) => relieve(sent, (sent += chunk.length)))
        // Whoever consumes it (the HTTP front's pipeline) sees a failure too; one dropped before it is
        // consumed (an interrupted request, a 304) must not take the process down with an unhandled 'error'.
        stream.on("error", () => undefined)
        return stream
      }),
    list: (databaseId) =>
      attempt(() => {
        let names: Array<string>
        try {
          names = readdirSync(areaOf(databaseId))
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
          throw error
        }
        return names.filter((n) => SHA256.test(n)).flatMap((n) => statOf(join(areaOf(databaseId), n)) ?? [])
      }),
    sweep: (databaseId, before) =>
      attempt(() => {
        const staging = join(areaOf(databaseId), ".staging")
        let names: Array<string>
        try {
          names = readdirSync(staging)
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "ENOENT") return 0
          throw error
        }
        let removed = 0
        for (const name of names) {
          const path = join(staging, name)
          if (statSync(path).mtimeMs < before) {
            rmSync(path, { force: true })
            removed++
          }
        }
        return removed
      }),
    databases: attempt(() => {
      try {
        return readdirSync(root).filter((n) => ID.test(n))
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
        throw error
      }
    }),
    touch: (databaseId, sha256) =>
      attempt(() => {
        const now = new Date()
        utimesSync(blobPath(databaseId, sha256), now, now)
      }),
    remove: (databaseId, sha256) =>
      attempt(() => {
        rmSync(blobPath(databaseId, sha256), { force: true })
        fsyncDirectory(areaOf(databaseId))
      })
  }
}

/** The filesystem backend under `<dataDir>/objects`. */
export const layerFilesystem = Layer.effect(
  ObjectStore,
  Effect.map(StoreConfig, (config) => makeFilesystem(join(config.dataDir, "objects")))
)

/** The filesystem backend under an explicit directory. */
export const layerFilesystemAt = (root: string) => Layer.succeed(ObjectStore, makeFilesystem(root))

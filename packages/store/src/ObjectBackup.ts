/**
 * The objects of a database in its backups: copied next to the backup files
 * (`<backups>/objects/<database id>/<sha256>`, content-addressed, so backups of one database
 * share their copies), and copied back on restore. A copy is checked against its name (its
 * sha256) before it is published, and published by temp + fsync + rename. The deployment's
 * `ObjectStore`, when the caller provides it, is where they are read and written back (an S3
 * bucket as well as a directory); without it, the filesystem area under the data directory.
 */
import { copyFileSync, createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs"
import { join } from "node:path"
import { pipeline } from "node:stream/promises"
import { Effect, Option, Stream } from "effect"
import { ownedTempNameFor, publish, sha256File, sweepStaleTemps } from "./internal/files.js"
import { ObjectStore, ObjectStoreError, type ObjectStoreShape } from "./ObjectStore.js"

const SHA256 = /^[0-9a-f]{64}$/

/** The filesystem object area of a database in a data directory (see `ObjectStore.makeFilesystem`). */
export const objectArea = (dataDir: string, databaseId: string): string => join(dataDir, "objects", databaseId)

const damaged = (name: string) => new Error(`object ${name.slice(0, 12)}… does not match its sha256`)

/** Copies the blobs of `from` missing in `to` (each checked against its sha256); answers how many were copied. */
const copyMissing = (from: string, to: string): number => {
  if (!existsSync(from)) return 0
  mkdirSync(to, { recursive: true })
  sweepStaleTemps(to)
  let copied = 0
  for (const name of readdirSync(from)) {
    if (!SHA256.test(name) || existsSync(join(to, name))) continue
    const temp = ownedTempNameFor(join(to, name))
    copyFileSync(join(from, name), temp)
    if (sha256File(temp) !== name) throw damaged(name)
    publish(temp, join(to, name))
    copied++
  }
  return copied
}

/**
 * Copies the store's blobs of `databaseId` missing in the directory `to`, streamed (never held in
 * memory). A blob collected between the listing and its read was unreferenced: it is skipped.
 */
const copyFromStore = (store: ObjectStoreShape, databaseId: string, to: string) =>
  Effect.gen(function* () {
    const blobs = yield* store.list(databaseId)
    yield* Effect.try(() => {
      mkdirSync(to, { recursive: true })
      sweepStaleTemps(to)
    })
    let copied = 0
    for (const blob of blobs) {
      const target = join(to, blob.sha256)
      if (existsSync(target)) continue
      const temp = ownedTempNameFor(target)
      const written = yield* Effect.acquireUseRelease(
        store.read(databaseId, blob.sha256),
        (body) => Effect.tryPromise({ try: () => pipeline(body, createWriteStream(temp)), catch: (cause) => new ObjectStoreError({ cause }) }),
        (body) => Effect.sync(() => body.destroy())
      ).pipe(
        Effect.as(true),
        Effect.catchAll((error) => Effect.flatMap(store.stat(databaseId, blob.sha256), (still) => (Option.isNone(still) ? Effect.succeed(false) : Effect.fail(error)))),
        Effect.onError(() => Effect.sync(() => rmSync(temp, { force: true })))
      )
      yield* Effect.try(() => {
        if (!written) return rmSync(temp, { force: true })
        if (sha256File(temp) !== blob.sha256) throw damaged(blob.sha256)
        publish(temp, target)
        copied++
      }).pipe(Effect.onError(() => Effect.sync(() => rmSync(temp, { force: true }))))
    }
    return copied
  })

/** Stores the blobs of the directory `from` the store lacks for `databaseId` (each checked against its name); answers how many. */
const copyIntoStore = (store: ObjectStoreShape, from: string, databaseId: string) =>
  Effect.gen(function* () {
    if (!existsSync(from)) return 0
    let copied = 0
    for (const name of yield* Effect.try(() => readdirSync(from).filter((n) => SHA256.test(n)))) {
      if (Option.isSome(yield* store.stat(databaseId, name))) continue
      const path = join(from, name)
      const body = Stream.suspend(() => Stream.fromAsyncIterable(createReadStream(path) as AsyncIterable<Uint8Array>, (cause) => new ObjectStoreError({ cause })))
      const stored = yield* store.put(databaseId, body, Number.MAX_SAFE_INTEGER)
      // A damaged copy is stored under its own digest (unreferenced, so collected); the restore fails.
      if (stored.sha256 !== name) return yield* Effect.fail(damaged(name))
      copied++
    }
    return copied
  })

/**
 * Copies the database's objects into the backup directory `to`, from the `ObjectStore` when one is
 * provided. Taken after the database snapshot: every object the snapshot references is still stored
 * then (collection keeps a released object for the retention window).
 */
export const backupObjects = (dataDir: string, databaseId: string, to: string) =>
  Effect.flatMap(Effect.serviceOption(ObjectStore), (store) =>
    Option.isSome(store)
      ? copyFromStore(store.value, databaseId, join(to, "objects", databaseId))
      : Effect.try(() => copyMissing(objectArea(dataDir, databaseId), join(to, "objects", databaseId)))
  )

/**
 * Copies a database's objects from the backup directory `from` back into the `ObjectStore` when one
 * is provided, else into the data directory's area (existing ones are kept).
 */
export const restoreObjects = (from: string, dataDir: string, databaseId: string) =>
  Effect.flatMap(Effect.serviceOption(ObjectStore), (store) =>
    Option.isSome(store)
      ? copyIntoStore(store.value, join(from, "objects", databaseId), databaseId)
      : Effect.try(() => copyMissing(join(from, "objects", databaseId), objectArea(dataDir, databaseId)))
  )

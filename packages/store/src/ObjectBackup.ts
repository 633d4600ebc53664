/**
 * The objects of a database in its backups: the filesystem object area copied next to the
 * backup files (`<backups>/objects/<database id>/<sha256>`, content-addressed, so backups of
 * one database share their copies), and copied back on restore. A copy is checked against
 * its name (its sha256) before it is published, and published by temp + fsync + rename.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { ownedTempNameFor, publish, sha256File, sweepStaleTemps } from "./internal/files.js"

const SHA256 = /^[0-9a-f]{64}$/

/** The filesystem object area of a database in a data directory (see `ObjectStore.makeFilesystem`). */
export const objectArea = (dataDir: string, databaseId: string): string => join(dataDir, "objects", databaseId)

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
    if (sha256File(temp) !== name) throw new Error(`object ${name.slice(0, 12)}… does not match its sha256`)
    publish(temp, join(to, name))
    copied++
  }
  return copied
}

/**
 * Copies the database's objects into the backup directory `to`. Taken after the database
 * snapshot: every object the snapshot references is still stored then (collection keeps a
 * released object for the retention window).
 */
export const backupObjects = (dataDir: string, databaseId: string, to: string) =>
  Effect.try(() => copyMissing(objectArea(dataDir, databaseId), join(to, "objects", databaseId)))

/** Copies a database's objects from the backup directory `from` back into the data directory (existing ones are kept). */
export const restoreObjects = (from: string, dataDir: string, databaseId: string) =>
  Effect.try(() => copyMissing(join(from, "objects", databaseId), objectArea(dataDir, databaseId)))

/**
 * The archive sidecar beside a database file (`<dbId>.archive.json`): written only when the file is
 * exactly the archive's state (a clean close with every commit shipped, or an online restore that just
 * published the file as a new history), removed as the next activation starts. A crash leaves none,
 * so a file that may hold unshipped commits is never trusted. Shared by `PgArchive` and `ArchiveRestore`.
 */
import { randomUUID } from "node:crypto"
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { Effect, Option, Schema } from "effect"

export const Sidecar = Schema.parseJson(
  Schema.Struct({ version: Schema.Literal(1), installId: Schema.String, generation: Schema.Number, seq: Schema.Number, position: Schema.Number })
)
export type Sidecar = Schema.Schema.Type<typeof Sidecar>

export const sidecarPath = (directory: string, databaseId: string) => join(directory, `${databaseId}.archive.json`)

/** The sidecar at `path`, if any (one that does not decode is none: the file is rebuilt). */
export const readSidecar = (path: string): Effect.Effect<Option.Option<Sidecar>> =>
  Effect.suspend(() => {
    if (!existsSync(path)) return Effect.succeedNone
    return Effect.map(Effect.orDie(Effect.try(() => readFileSync(path, "utf8"))), (text) => Option.getRight(Schema.decodeUnknownEither(Sidecar)(text)))
  })

export const dropSidecar = (path: string): Effect.Effect<void> => Effect.orDie(Effect.try(() => rmSync(path, { force: true })))

/** Writes the sidecar atomically (temp + fsync + rename + fsync of the directory). */
export const writeSidecar = (path: string, sidecar: Sidecar): void => writeAtomically(path, Schema.encodeSync(Sidecar)(sidecar))

/** Temp + fsync + rename + fsync of the directory: the file appears whole or not at all. */
export const writeAtomically = (path: string, text: string) => {
  const temp = `${path}.${randomUUID()}.tmp`
  writeFileSync(temp, text)
  const fd = openSync(temp, "r+")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temp, path)
  fsyncDirectory(dirname(path))
}

export const fsyncDirectory = (directory: string) => {
  const dir = openSync(directory, "r")
  try {
    fsyncSync(dir)
  } finally {
    closeSync(dir)
  }
}

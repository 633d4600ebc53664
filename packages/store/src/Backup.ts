/**
 * Online, consistent backups of database files, taken while the writer keeps committing:
 * `VACUUM INTO` on a read-only connection copies one read snapshot, and a manifest written
 * after the file (both published by temp + fsync + rename) is what makes a backup valid.
 * A backup without its manifest, or whose bytes do not match it, is never restored.
 */
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Data, Effect, Option, Schema } from "effect"
import { createOnce, fsyncFile, ownedTempNameFor, publish, sha256File, sweepStaleTemps, writeAtomically } from "./internal/files.js"
import { commitsTable, installTable } from "./Log.js"
import { backupObjects } from "./ObjectBackup.js"

/** What a backup says about itself; read back through `Schema`, never cast. */
export const Manifest = Schema.Struct({
  version: Schema.Literal(1),
  /** The deployment the backup was taken from; restore refuses another deployment's. */
  deploymentId: Schema.String,
  /** Opaque database id (the file name), never the key. */
  databaseId: Schema.String,
  /** Root schema, catalog token and representation fingerprint of the backup's install record. */
  root: Schema.String,
  catalogToken: Schema.String,
  fingerprint: Schema.String,
  /** The last committed position the backup holds (0: nothing committed). */
  position: Schema.NonNegativeInt,
  /** When that commit was made; null for an empty log. */
  committedAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  /** The backup file's name, in the manifest's directory. */
  file: Schema.String.pipe(Schema.pattern(/^[0-9A-Za-z@._-]+\.sqlite$/)),
  bytes: Schema.NonNegativeInt,
  sha256: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/))
})
export type Manifest = typeof Manifest.Type

const ManifestJson = Schema.parseJson(Manifest, { space: 2 })
const manifestSuffix = ".manifest.json"

/** Operator-facing: a backup could not be taken (nothing was published). */
export class BackupError extends Data.TaggedError("BackupError")<{
  readonly databaseId: string
  readonly reason: string
  readonly cause?: unknown
}> {
  override get message(): string {
    const cause = this.cause instanceof Error ? `: ${this.cause.message}` : ""
    return `Backup of database ${this.databaseId} failed: ${this.reason}${cause}`
  }
}

/** Where the store keeps a database's file (see `Databases`). */
export const databaseFile = (dataDir: string, databaseId: string): string => join(dataDir, "databases", `${databaseId}.sqlite`)

/** Opaque ids of the database files in a data directory. */
export const databaseIds = (dataDir: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.sync(() => {
    const directory = join(dataDir, "databases")
    if (!existsSync(directory)) return []
    return readdirSync(directory)
      .filter((name) => /^[0-9a-z]+\.sqlite$/.test(name))
      .map((name) => name.slice(0, -".sqlite".length))
      .sort()
  })

/**
 * The deployment's identity for backups: `<dataDir>/deployment-id`, a random id created
 * once (atomically) and never derived from a secret.
 */
export const deploymentIdOf = (dataDir: string): Effect.Effect<string> =>
  Effect.sync(() => {
    const path = join(dataDir, "deployment-id")
    if (!existsSync(path)) {
      mkdirSync(dataDir, { recursive: true })
      createOnce(path, `${randomUUID()}\n`)
    }
    return readFileSync(path, "utf8").trim()
  })

const InstallRow = Schema.Struct({ root: Schema.String, catalog_token: Schema.String, fingerprint: Schema.String })
const HeadRow = Schema.Struct({ position: Schema.Number, committed_at: Schema.String })

/** The install record and last commit a database file holds, read on a read-only connection. */
export const describeFile = (filename: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      // A backup file is in rollback-journal mode and stays so: nothing is written to it.
      const sql = yield* SqliteClient.make({ filename, readonly: true, disableWAL: true })
      const install = yield* SqlSchema.single({
        Request: Schema.Void,
        Result: InstallRow,
        execute: () => sql`SELECT root, catalog_token, fingerprint FROM ${sql(installTable)} WHERE id = 1`
      })(undefined)
      const head = yield* SqlSchema.findOne({
        Request: Schema.Void,
        Result: HeadRow,
        execute: () => sql`SELECT position, committed_at FROM ${sql(commitsTable)} ORDER BY position DESC LIMIT 1`
      })(undefined)
      return {
        root: install.root,
        catalogToken: install.catalog_token,
        fingerprint: install.fingerprint,
        position: Option.match(head, { onNone: () => 0, onSome: (h) => h.position }),
        committedAt: Option.match(head, { onNone: () => null, onSome: (h) => h.committed_at })
      }
    })
  ).pipe(Effect.provide(Reactivity.layer))

export interface BackupOptions {
  readonly dataDir: string
  readonly deploymentId: string
  readonly databaseId: string
  /** Directory the backup file and its manifest are written to (created if missing). */
  readonly to: string
}

/**
 * Backs up one database without stopping its writer: a `VACUUM INTO` snapshot on a
 * separate read-only connection, fsynced and renamed into place, then its manifest (the
 * position and install record read from the snapshot itself), also atomically. Answers
 * the manifest. A killed backup leaves at most a temp file (removed by the next backup into the
 * same directory) or a file without a manifest (never used).
 */
export const backupDatabase = Effect.fn("Backup.backupDatabase")(function* (options: BackupOptions) {
  const { databaseId } = options
  const fail = (reason: string) => (cause: unknown) => new BackupError({ databaseId, reason, cause })
  const source = databaseFile(options.dataDir, databaseId)
  if (!existsSync(source)) return yield* new BackupError({ databaseId, reason: `no database file at ${source}` })
  yield* Effect.try({ try: () => mkdirSync(options.to, { recursive: true }), catch: fail("cannot create the backup directory") })
  // What a killed backup left behind (its process gone) goes first; a running one's copy stays.
  const swept = yield* Effect.try({ try: () => sweepStaleTemps(options.to), catch: fail("cannot clear the backup directory's stale temps") })
  if (swept > 0) yield* Effect.logInfo("removed the temps of an interrupted backup").pipe(Effect.annotateLogs({ removed: swept }))
  const temp = `${ownedTempNameFor(join(options.to, "x"))}.sqlite`
  const snapshot = Effect.gen(function* () {
    yield* Effect.scoped(
      Effect.gen(function* () {
        const reader = yield* SqliteClient.make({ filename: source, readonly: true })
        yield* reader.unsafe("VACUUM INTO ?", [temp])
      })
    ).pipe(Effect.provide(Reactivity.layer), Effect.mapError(fail("snapshot failed")))
    const held = yield* describeFile(temp).pipe(Effect.mapError(fail("the snapshot holds no install record")))
    const createdAt = yield* Clock.currentTimeMillis
    const name = `${databaseId}@${held.position}-${createdAt}-${randomUUID().slice(0, 8)}`
    const file = `${name}.sqlite`
    const { bytes, sha256 } = yield* Effect.try({
      try: () => {
        fsyncFile(temp)
        return { bytes: statSync(temp).size, sha256: sha256File(temp) }
      },
      catch: fail("cannot read the snapshot back")
    })
    const manifest: Manifest = {
      version: 1,
      deploymentId: options.deploymentId,
      databaseId,
      ...held,
      createdAt: new Date(createdAt).toISOString(),
      file,
      bytes,
      sha256
    }
    const text = yield* Schema.encode(ManifestJson)(manifest).pipe(Effect.orDie)
    // The objects after the snapshot (so it references none that is not copied), before the manifest.
    yield* backupObjects(options.dataDir, databaseId, options.to).pipe(Effect.mapError(fail("cannot copy the objects")))
    // The file first, the manifest last: a manifest always names a complete file.
    yield* Effect.try({
      try: () => {
        publish(temp, join(options.to, file))
        writeAtomically(join(options.to, `${name}${manifestSuffix}`), `${text}\n`)
      },
      catch: fail("cannot publish the backup")
    })
    yield* Effect.logInfo("database backed up").pipe(
      Effect.annotateLogs({ database: databaseId, position: held.position, bytes })
    )
    return manifest
  })
  return yield* snapshot.pipe(
    // Whatever failed, no temp file stays behind (a killed process leaves one; it is never read).
    Effect.ensuring(Effect.sync(() => rmSync(temp, { force: true })))
  )
})

/** Backs up every database of the data directory, one after another. */
export const backupAll = Effect.fn("Backup.backupAll")(function* (options: Omit<BackupOptions, "databaseId">) {
  const ids = yield* databaseIds(options.dataDir)
  return yield* Effect.forEach(ids, (databaseId) => backupDatabase({ ...options, databaseId }))
})

/** A backup found in a directory: its decoded manifest and the path of its file. */
export interface Found {
  readonly manifest: Manifest
  readonly path: string
}

/**
 * The backups of `databaseId` in `directory` whose manifest decodes, oldest position first.
 * Their bytes are not checked here (restore checks the one it uses); files without a
 * manifest are not backups.
 */
export const list = (directory: string, databaseId: string): Effect.Effect<ReadonlyArray<Found>> =>
  Effect.gen(function* () {
    if (!existsSync(directory)) return []
    const found: Array<Found> = []
    for (const name of readdirSync(directory).filter((n) => n.endsWith(manifestSuffix)).sort()) {
      const decoded = yield* Effect.option(
        Effect.flatMap(
          Effect.try(() => readFileSync(join(directory, name), "utf8")),
          (text) => Schema.decodeUnknown(ManifestJson)(text)
        )
      )
      if (Option.isNone(decoded)) {
        yield* Effect.logWarning("ignoring an unreadable backup manifest").pipe(Effect.annotateLogs({ manifest: name }))
        continue
      }
      if (decoded.value.databaseId !== databaseId) continue
      found.push({ manifest: decoded.value, path: join(directory, decoded.value.file) })
    }
    return found.sort((a, b) => a.manifest.position - b.manifest.position || a.manifest.createdAt.localeCompare(b.manifest.createdAt))
  })

/** The invocation id a backup file holds at `position` (restore checks a later log continues it). */
export const invocationAt = (filename: string, position: number) =>
  Effect.scoped(
    Effect.flatMap(SqliteClient.make({ filename, readonly: true, disableWAL: true }), (sql) =>
      SqlSchema.findOne({
        Request: Schema.Number,
        Result: Schema.Struct({ invocation_id: Schema.String }),
        execute: (p) => sql`SELECT invocation_id FROM ${sql(commitsTable)} WHERE position = ${p}`
      })(position)
    )
  ).pipe(
    Effect.map(Option.map((r) => r.invocation_id)),
    Effect.provide(Reactivity.layer)
  )

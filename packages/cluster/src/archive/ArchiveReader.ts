/**
 * Reading a database's archive: its head, its segments and snapshots (index in PostgreSQL, bytes in
 * the object store), and `materialize`, which builds a database file from them at the head or at any
 * position since the oldest kept snapshot. The owner's rebuild, point-in-time restore and read-only
 * followers all read through here; nothing here writes to the archive.
 */
import { createHash, randomUUID } from "node:crypto"
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import type { Readable } from "node:stream"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Effect, Option, Schema } from "effect"
import type { Catalog } from "@cairn/catalog/Catalog"
import { ArchiveFailed, namespaceOf } from "@cairn/store/Archive"
import { install, installIdOf } from "@cairn/store/Install"
import { ObjectStore } from "@cairn/store/ObjectStore"
import { Head, heads, Int, SegmentRow, segments, SnapshotRow, snapshots } from "./ArchiveTables.js"
import * as Segment from "./Segment.js"

const unavailable = (cause: unknown) => new ArchiveFailed({ reason: "unavailable", cause })
const diverged = (cause: unknown) => new ArchiveFailed({ reason: "diverged", cause })

/** PostgreSQL and decoding failures of an index read, as the archive's error. */
const indexed = <A, R>(effect: Effect.Effect<A, unknown, R>): Effect.Effect<A, ArchiveFailed, R> =>
  Effect.mapError(effect, (e) => ((e as { readonly _tag?: unknown })._tag === "ParseError" ? diverged(e) : unavailable(e)))

/** The head of `databaseId`: owner epoch, last shipped seq and position (None: never archived). */
export const head = (databaseId: string): Effect.Effect<Option.Option<Head>, ArchiveFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    indexed(
      SqlSchema.findOne({
        Request: Schema.String,
        Result: Head,
        execute: (id) => sql`SELECT db_id, install_id, generation, epoch, seq, position FROM ${sql(heads)} WHERE db_id = ${id}`
      })(databaseId)
    )
  )

/** The segments of `generation` after seq `afterSeq` (at most `throughSeq`, none starting past `throughPosition`), in seq order. */
export const segmentsAfter = (
  databaseId: string,
  generation: number,
  afterSeq: number,
  options: { readonly throughSeq?: number; readonly throughPosition?: number } = {}
): Effect.Effect<ReadonlyArray<SegmentRow>, ArchiveFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    indexed(
      SqlSchema.findAll({
        Request: Schema.Struct({ id: Schema.String, generation: Schema.Number, after: Schema.Number, seq: Schema.Number, position: Schema.Number }),
        Result: SegmentRow,
        execute: (r) =>
          sql`SELECT db_id, generation, seq, first_position, last_position, sha256, bytes FROM ${sql(segments)}
              WHERE db_id = ${r.id} AND generation = ${r.generation} AND seq > ${r.after} AND seq <= ${r.seq} AND first_position <= ${r.position}
              ORDER BY seq`
      })({
        id: databaseId,
        generation,
        after: afterSeq,
        seq: options.throughSeq ?? Number.MAX_SAFE_INTEGER,
        position: options.throughPosition ?? Number.MAX_SAFE_INTEGER
      })
    )
  )

/** The newest snapshot of `generation` at or before `position` (and at or before seq `maxSeq`). */
export const snapshotAtOrBefore = (
  databaseId: string,
  generation: number,
  position: number,
  maxSeq: number = Number.MAX_SAFE_INTEGER
): Effect.Effect<Option.Option<SnapshotRow>, ArchiveFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    indexed(
      SqlSchema.findOne({
        Request: Schema.Struct({ id: Schema.String, generation: Schema.Number, position: Schema.Number, seq: Schema.Number }),
        Result: SnapshotRow,
        execute: (r) =>
          sql`SELECT db_id, generation, seq, position, sha256, bytes, manifest FROM ${sql(snapshots)}
              WHERE db_id = ${r.id} AND generation = ${r.generation} AND position <= ${r.position} AND seq <= ${r.seq}
              ORDER BY seq DESC LIMIT 1`
      })({ id: databaseId, generation, position, seq: maxSeq })
    )
  )

/** The position of the oldest kept snapshot of `generation` (the earliest point-in-time restore reaches). */
export const oldestSnapshotPosition = (databaseId: string, generation: number): Effect.Effect<Option.Option<number>, ArchiveFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    indexed(
      SqlSchema.findOne({
        Request: Schema.Struct({ id: Schema.String, generation: Schema.Number }),
        Result: Schema.Struct({ position: Int }),
        execute: (r) => sql`SELECT position FROM ${sql(snapshots)} WHERE db_id = ${r.id} AND generation = ${r.generation} ORDER BY seq LIMIT 1`
      })({ id: databaseId, generation })
    )
  ).pipe(Effect.map(Option.map((r) => r.position)))

/** Every byte of a Node stream; its `error` is handled here (and the stream destroyed if interrupted). */
const readAll = (stream: Readable): Effect.Effect<Buffer, ArchiveFailed> =>
  Effect.async<Buffer, ArchiveFailed>((resume) => {
    const chunks: Array<Buffer> = []
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.once("end", () => resume(Effect.succeed(Buffer.concat(chunks))))
    stream.once("error", (cause) => resume(Effect.fail(unavailable(cause))))
    return Effect.sync(() => stream.destroy())
  })

/** A blob of `databaseId`'s archive, its bytes checked against its name. */
export const readBlob = (databaseId: string, sha256: string): Effect.Effect<Buffer, ArchiveFailed, ObjectStore> =>
  Effect.gen(function* () {
    const store = yield* ObjectStore
    const stream = yield* Effect.mapError(store.read(namespaceOf(databaseId), sha256), unavailable)
    const bytes = yield* readAll(stream)
    if (createHash("sha256").update(bytes).digest("hex") !== sha256) return yield* diverged(new Error("an archive blob does not match its digest"))
    return bytes
  })

/** One segment's content. */
export const readSegment = (row: SegmentRow): Effect.Effect<Segment.Segment, ArchiveFailed, ObjectStore> =>
  Effect.flatMap(readBlob(row.db_id, row.sha256), Segment.decode)

/** Several segments' contents, in the order given (fetched a few at a time). */
export const readSegments = (rows: ReadonlyArray<SegmentRow>): Effect.Effect<ReadonlyArray<Segment.Segment>, ArchiveFailed, ObjectStore> =>
  Effect.forEach(rows, readSegment, { concurrency: 8 })

export interface Materialized {
  /** The position the built file ends at. */
  readonly position: number
  /** The last seq it holds (the snapshot's, or the last segment applied). */
  readonly seq: number
  readonly generation: number
  /** The install id the file holds (the archive's). */
  readonly installId: string
}

export interface MaterializeOptions {
  readonly databaseId: string
  /** The deployment's catalog: the tables the segments' changes are applied to. */
  readonly catalog: Catalog
  /** Where the built file goes (replaced whole; its old -wal and -shm removed first). */
  readonly into: string
  /** A point in time; default: the head's position (everything shipped). */
  readonly position?: number | undefined
  /** The head to build (default: read now). */
  readonly head?: Head | undefined
}

const removeFile = (path: string) => {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(path + suffix, { force: true })
}

/** Installs `catalog` on a file being built (its install id kept); a catalog that cannot read it is `diverged`. */
export const installCatalog = (sql: SqlClient.SqlClient, catalog: Catalog, databaseId: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => install(sql, catalog, databaseId, new Date(now).toISOString(), randomUUID())).pipe(
    Effect.mapError((e) => (e._tag === "IncompatibleCatalog" ? diverged(e) : unavailable(e)))
  )

/**
 * Builds the database file of `databaseId` at `into`: the newest snapshot at or before the target
 * position, then the segments after it (before images checked) up to the target, in a temp file
 * beside `into`, renamed over it once complete (fsynced). Fails `diverged` when the archive cannot
 * reach the target (older than the oldest kept snapshot, a missing segment, an image that does not
 * continue), `unavailable` when PostgreSQL or the object store fails.
 */
export const materialize = (options: MaterializeOptions): Effect.Effect<Materialized, ArchiveFailed, SqlClient.SqlClient | ObjectStore> =>
  Effect.gen(function* () {
    const { databaseId, catalog, into } = options
    const found = options.head ?? Option.getOrUndefined(yield* head(databaseId))
    if (found === undefined) return yield* diverged(new Error("the database has no archive"))
    const target = options.position ?? found.position
    if (target > found.position || target < 0) return yield* diverged(new Error(`position ${target} is past the archive's head ${found.position}`))
    const snapshot = yield* snapshotAtOrBefore(databaseId, found.generation, target, found.seq)
    if (Option.isNone(snapshot)) return yield* diverged(new Error(`no kept snapshot at or before position ${target}`))
    const snap = snapshot.value
    const rows = yield* segmentsAfter(databaseId, found.generation, snap.seq, { throughSeq: found.seq, throughPosition: target })
    const contiguous = rows.every((r, i) => r.seq === snap.seq + 1 + i)
    const complete = options.position !== undefined || (rows.length === 0 ? snap.seq === found.seq : rows[rows.length - 1]!.seq === found.seq)
    if (!contiguous || !complete) return yield* diverged(new Error("the archive is missing segments"))
    const [bytes, contents] = yield* Effect.all([readBlob(databaseId, snap.sha256), readSegments(rows)], { concurrency: 2 })

    const temp = join(dirname(into), `.tmp-${randomUUID()}.sqlite`)
    const built = Effect.gen(function* () {
      yield* Effect.try({ try: () => writeFileSync(temp, bytes), catch: unavailable })
      return yield* Effect.scoped(
        Effect.gen(function* () {
          // A snapshot is in rollback-journal mode (as `VACUUM INTO` writes it); it stays so until opened by the store.
          const sql = yield* SqliteClient.make({ filename: temp, disableWAL: true }).pipe(Effect.mapError(unavailable))
          // The deployment's catalog first (as `Restore` does): the segments are applied to its layout,
          // whichever install wrote them (catalog changes are additive, or refused here).
          yield* installCatalog(sql, catalog, databaseId)
          const position = yield* sql.withTransaction(Segment.apply(sql, catalog, contents, snap.position, target)).pipe(
            Effect.catchTag("SqlError", (e) => Effect.fail(unavailable(e)))
          )
          const installId = yield* installIdOf(sql).pipe(Effect.mapError(unavailable))
          if (Option.isNone(installId)) return yield* diverged(new Error("the snapshot has no install id"))
          yield* sql.unsafe("PRAGMA journal_mode = DELETE").pipe(Effect.mapError(unavailable))
          const last = contents.length === 0 ? snap.seq : contents[contents.length - 1]!.seq
          return { position, seq: last, generation: found.generation, installId: installId.value } satisfies Materialized
        })
      )
    })
    const materialized = yield* built.pipe(Effect.onError(() => Effect.sync(() => removeFile(temp))))
    yield* Effect.try({
      try: () => {
        const fd = openSync(temp, "r+")
        try {
          fsyncSync(fd)
        } finally {
          closeSync(fd)
        }
        // The old file's WAL must never be read against the new file.
        for (const suffix of ["-wal", "-shm", "-journal"]) rmSync(into + suffix, { force: true })
        renameSync(temp, into)
        const dir = openSync(dirname(into), "r")
        try {
          fsyncSync(dir)
        } finally {
          closeSync(dir)
        }
      },
      catch: (cause) => {
        removeFile(temp)
        return unavailable(cause)
      }
    })
    return materialized
  }).pipe(Effect.provide(Reactivity.layer))

/**
 * The archive's tables in PostgreSQL (next to the cluster's own): one head per database (its owner's
 * epoch, the last shipped seq and position: the fence every ship compares against), and the index of
 * the segments and snapshots whose bytes live in the object store. Created if missing when a layer
 * that uses them is built, under an advisory lock so that processes starting together do not race.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"

export const heads = "cairn_archive_heads"
export const segments = "cairn_archive_segments"
export const snapshots = "cairn_archive_snapshots"
/** The NOTIFY channel of shipped groups: payload `<dbId>:<seq>:<position>`. */
export const channel = "cairn_archive"

const ddl: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS ${heads} (
    db_id TEXT PRIMARY KEY,
    install_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    position BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
  )`,
  `CREATE TABLE IF NOT EXISTS ${segments} (
    db_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    first_position BIGINT NOT NULL,
    last_position BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (db_id, generation, seq)
  )`,
  `CREATE TABLE IF NOT EXISTS ${snapshots} (
    db_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    position BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    manifest TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (db_id, generation, seq)
  )`
]

/** Creates the tables if missing (idempotent; concurrent callers serialize on an advisory lock). */
export const ensure = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext(${heads}))`
      for (const statement of ddl) yield* sql.unsafe(statement)
    })
  )
})

/** A BIGINT column as `pg` answers it (a string), or a number. */
export const Int = Schema.Union(Schema.Int, Schema.NumberFromString.pipe(Schema.int()))

export const Head = Schema.Struct({
  db_id: Schema.String,
  install_id: Schema.String,
  generation: Int,
  epoch: Int,
  seq: Int,
  position: Int
})
export type Head = typeof Head.Type

export const SegmentRow = Schema.Struct({
  db_id: Schema.String,
  generation: Int,
  seq: Int,
  first_position: Int,
  last_position: Int,
  sha256: Schema.String,
  bytes: Int
})
export type SegmentRow = typeof SegmentRow.Type

export const SnapshotRow = Schema.Struct({
  db_id: Schema.String,
  generation: Int,
  seq: Int,
  position: Int,
  sha256: Schema.String,
  bytes: Int,
  manifest: Schema.String
})
export type SnapshotRow = typeof SnapshotRow.Type

/**
 * The internal tables of a database file: `_cairn_commits`, the authoritative log
 * (one row per committed invocation, positions 1, 2, 3… without gaps), `_cairn_receipts`
 * (every decided intent by invocation id) and `_cairn_install` (the catalog installed, and the
 * file's install id: its identity, also held by the deployment's `Registry`).
 */
import { type SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"

export const commitsTable = "_cairn_commits"
export const receiptsTable = "_cairn_receipts"
export const installTable = "_cairn_install"
/** One row: the compaction watermark (commits at or below it have no change payload). */
export const compactionTable = "_cairn_compaction"
/**
 * One row: the receipt horizon (an invocation id prefix: every receipt of an invocation id below it
 * was pruned, so such an id is refused, never decided again) and how far commit headers were pruned.
 */
export const retentionTable = "_cairn_retention"
/** One row: the identity of the data directory that created this file (see `DataDirectory`). */
export const directoryTable = "_cairn_directory"

/**
 * One row-level change of a commit. `before`/`after` are the full stored records as
 * `Layout.decodeRecord` gives them; `null` when the row did not / does not exist.
 * Several writes to one row in one invocation are folded into one change.
 */
export const Change = Schema.Struct({
  entity: Schema.String,
  id: Schema.String,
  before: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  after: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type Change = typeof Change.Type

/** A `_cairn_commits` row, as sync reads it. */
export interface Commit {
  readonly position: number
  readonly invocationId: string
  /** `Owner.name` of the operation. */
  readonly operation: string
  readonly targetEntity: string | null
  readonly targetId: string | null
  readonly changes: ReadonlyArray<Change>
  readonly committedAt: string
}

export const ddl: ReadonlyArray<string> = [
  `CREATE TABLE IF NOT EXISTS ${installTable} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    root TEXT NOT NULL,
    catalog_token TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    representation TEXT NOT NULL,
    installed_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    install_id TEXT
  ) STRICT`,
  `CREATE TABLE IF NOT EXISTS ${commitsTable} (
    position INTEGER PRIMARY KEY,
    invocation_id TEXT NOT NULL UNIQUE,
    operation TEXT NOT NULL,
    target_entity TEXT,
    target_id TEXT,
    intent TEXT NOT NULL,
    subject TEXT NOT NULL,
    receipt TEXT NOT NULL,
    changes TEXT NOT NULL,
    committed_at TEXT NOT NULL
  ) STRICT`,
  `CREATE TABLE IF NOT EXISTS ${receiptsTable} (
    invocation_id TEXT PRIMARY KEY NOT NULL,
    intent TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('committed', 'rejected')),
    position INTEGER NOT NULL,
    receipt TEXT NOT NULL
  ) STRICT, WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS ${compactionTable} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    watermark INTEGER NOT NULL
  ) STRICT`,
  `CREATE TABLE IF NOT EXISTS ${retentionTable} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    receipt_horizon TEXT NOT NULL,
    commits_pruned_through INTEGER NOT NULL
  ) STRICT`,
  `CREATE TABLE IF NOT EXISTS ${directoryTable} (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    directory_id TEXT NOT NULL
  ) STRICT`
]

/** The last committed position (0 when nothing is committed). */
export const lastPosition = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql.unsafe<{ readonly p: number }>(`SELECT coalesce(max(position), 0) AS p FROM ${commitsTable}`),
    (rows) => Number(rows[0]?.p ?? 0)
  )

/** A `_cairn_commits` row as sync reads it: `changes` is stored JSON, decoded, not cast. */
const CommitRow = Schema.Struct({
  position: Schema.Number,
  invocation_id: Schema.String,
  operation: Schema.String,
  target_entity: Schema.NullOr(Schema.String),
  target_id: Schema.NullOr(Schema.String),
  changes: Schema.parseJson(Schema.Array(Change)),
  committed_at: Schema.String
})

/** Commits after `position`, in order, at most `limit`. A row that does not decode is a defect. */
export const commitsAfter = (sql: SqlClient.SqlClient, position: number, limit: number) =>
  SqlSchema.findAll({
    Request: Schema.Struct({ position: Schema.Number, limit: Schema.Number }),
    Result: CommitRow,
    execute: (request) =>
      sql`SELECT position, invocation_id, operation, target_entity, target_id, changes, committed_at FROM ${sql(commitsTable)} WHERE position > ${request.position} ORDER BY position LIMIT ${request.limit}`
  })({ position, limit }).pipe(
    Effect.map((rows): ReadonlyArray<Commit> =>
      rows.map((r) => ({
        position: r.position,
        invocationId: r.invocation_id,
        operation: r.operation,
        targetEntity: r.target_entity,
        targetId: r.target_id,
        changes: r.changes,
        committedAt: r.committed_at
      }))
    ),
    Effect.catchTag("ParseError", Effect.die)
  )

/**
 * The last position of a batch of the commits after `position` (none past `last`): as many as
 * fit together in `maxBytes` of stored `changes` (their JSON text's bytes), at least one (a
 * larger commit goes alone); `position` when there is none. Reads only sizes, a chunk of
 * rows at a time, so a cursor far behind costs the rows up to the bound, not the whole range.
 */
export const batchEnd = (sql: SqlClient.SqlClient, position: number, last: number, maxBytes: number) =>
  Effect.gen(function* () {
    let end = position
    let bytes = 0
    while (end < last) {
      const sizes = yield* sql.unsafe<{ readonly p: number; readonly b: number }>(
        `SELECT position AS p, octet_length(changes) AS b FROM ${commitsTable} WHERE position > ? AND position <= ? ORDER BY position LIMIT 512`,
        [end, last]
      )
      if (sizes.length === 0) return end
      for (const size of sizes) {
        bytes += Number(size.b)
        if (bytes > maxBytes && end > position) return end
        end = Number(size.p)
      }
    }
    return end
  })

/**
 * The first position of the longest run of commits ending at `last` (none at or before
 * `after`) whose stored `changes` fit together in `maxBytes`; `last + 1` when the last alone
 * holds more. Reads only sizes.
 */
export const fittingFrom = (sql: SqlClient.SqlClient, after: number, last: number, maxBytes: number) =>
  Effect.map(
    sql.unsafe<{ readonly p: number | null }>(
      `SELECT min(position) AS p FROM (SELECT position, sum(octet_length(changes)) OVER (ORDER BY position DESC) AS suffix FROM ${commitsTable} WHERE position > ? AND position <= ?) WHERE suffix <= ?`,
      [after, last, maxBytes]
    ),
    (rows) => (rows[0]?.p == null ? last + 1 : Number(rows[0].p))
  )

/** The compaction watermark: commits at or below it kept no change payload (0 when none were compacted). */
export const watermark = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql.unsafe<{ readonly w: number }>(`SELECT coalesce(max(watermark), 0) AS w FROM ${compactionTable}`),
    (rows) => Number(rows[0]?.w ?? 0)
  )

/**
 * Drops the change payloads of commits at or below `through` and raises the watermark.
 * Positions, receipts, intents and every other column stay, so idempotent replays and
 * positions are unaffected; only sync's history before the watermark is gone. Run it
 * inside a write transaction; answers how many commits lost their payload.
 */
export const compact = (sql: SqlClient.SqlClient, through: number) =>
  Effect.gen(function* () {
    const from = yield* watermark(sql)
    if (through <= from) return 0
    yield* sql.unsafe(`UPDATE ${commitsTable} SET changes = '[]' WHERE position > ? AND position <= ?`, [from, through])
    yield* sql.unsafe(
      `INSERT INTO ${compactionTable} (id, watermark) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET watermark = excluded.watermark`,
      [through]
    )
    return through - from
  })

/**
 * The invocation id prefix of a UUIDv7 minted at `millis`: its 48-bit timestamp as the id's first
 * 13 characters (`xxxxxxxx-xxxx`). Canonical (lowercase) ids compare as their timestamps do, so every
 * id minted before `millis` sorts below it, and every id minted at or after it above.
 */
export const invocationPrefix = (millis: number): string => {
  const hex = Math.max(0, Math.floor(millis)).toString(16).padStart(12, "0").slice(-12)
  return `${hex.slice(0, 8)}-${hex.slice(8)}`
}

/** What `prune` keeps track of: the receipt horizon ("" when none was pruned) and the last pruned commit header. */
export interface Retention {
  readonly receiptHorizon: string
  readonly commitsPrunedThrough: number
}

/** The file's retention state (nothing pruned yet: `{ receiptHorizon: "", commitsPrunedThrough: 0 }`). */
export const retention = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql.unsafe<{ readonly h: string; readonly c: number }>(`SELECT receipt_horizon AS h, commits_pruned_through AS c FROM ${retentionTable} WHERE id = 1`),
    (rows): Retention => ({ receiptHorizon: rows[0]?.h ?? "", commitsPrunedThrough: Number(rows[0]?.c ?? 0) })
  )

/**
 * The owner of the store's internal operations (a declared migration's batches): their invocation ids
 * are digests, not times, so their receipts are never pruned and their ids never refused by the horizon.
 */
export const internalOwner = "_cairn"

/** Rows one pruning transaction deletes at most, so a long-neglected history is pruned in turns with the writer's groups. */
export const pruneChunk = 2000

/**
 * One turn of history pruning, inside a write transaction: deletes at most `pruneChunk` receipts of
 * invocation ids below `receiptsBefore` (an `invocationPrefix`) decided at or below the compaction
 * watermark (a point-in-time restore replays the log above it, receipts included), and at most `pruneChunk` commit headers
 * at or below the compaction watermark (their change payload already gone, so sync never reads them)
 * committed before `commitsBefore` (an ISO instant). The horizon is raised to `receiptsBefore` first,
 * in the same transaction: an id below it is refused from then on, whatever is still to prune. The
 * last commit is never deleted (the watermark stays below it). Answers what it deleted.
 */
export const prune = (sql: SqlClient.SqlClient, receiptsBefore: string, commitsBefore: string) =>
  Effect.gen(function* () {
    const current = yield* retention(sql)
    const horizon = receiptsBefore > current.receiptHorizon ? receiptsBefore : current.receiptHorizon
    const mark = yield* watermark(sql)
    // Only decisions at or below the watermark: a restore replays the log above it with its receipts.
    const receipts = yield* sql.unsafe<{ readonly n: number }>(
      `DELETE FROM ${receiptsTable} WHERE invocation_id IN (SELECT invocation_id FROM ${receiptsTable} WHERE invocation_id < ? AND position <= ? AND json_extract(receipt, '$.operation.owner.name') IS NOT '${internalOwner}' LIMIT ${pruneChunk}) RETURNING 1 AS n`,
      [horizon, mark]
    )
    const head = yield* lastPosition(sql)
    // Commit headers go in position order, up to the last one old enough (never the last commit).
    const upTo = Math.min(mark, head - 1, current.commitsPrunedThrough + pruneChunk)
    let through = current.commitsPrunedThrough
    if (upTo > through) {
      const old = yield* sql.unsafe<{ readonly p: number | null }>(
        `SELECT max(position) AS p FROM ${commitsTable} WHERE position > ? AND position <= ? AND committed_at < ?`,
        [through, upTo, commitsBefore]
      )
      const last = old[0]?.p == null ? through : Number(old[0].p)
      if (last > through) {
        yield* sql.unsafe(`DELETE FROM ${commitsTable} WHERE position > ? AND position <= ?`, [through, last])
        through = last
      }
    }
    const commits = through - current.commitsPrunedThrough
    yield* sql.unsafe(
      `INSERT INTO ${retentionTable} (id, receipt_horizon, commits_pruned_through) VALUES (1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET receipt_horizon = excluded.receipt_horizon, commits_pruned_through = excluded.commits_pruned_through`,
      [horizon, through]
    )
    return { receipts: receipts.length, commits, horizon }
  })

/** The identity of the data directory this file was stamped by (see `DataDirectory`), if any. */
export const directoryOf = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql.unsafe<{ readonly d: string }>(`SELECT directory_id AS d FROM ${directoryTable} WHERE id = 1`),
    (rows): string | undefined => rows[0]?.d
  )

/** Stamps the file with the data directory's identity (replacing another: the registry vouched for the file). */
export const stampDirectory = (sql: SqlClient.SqlClient, directoryId: string) =>
  sql.unsafe(
    `INSERT INTO ${directoryTable} (id, directory_id) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET directory_id = excluded.directory_id`,
    [directoryId]
  )

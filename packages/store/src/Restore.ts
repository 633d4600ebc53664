/**
 * Restore of one database from backups, to the newest backup or to a point in time:
 * the newest valid backup at or before the target, then the commits after it up to the
 * target re-applied from a later copy of the log (their row images and receipts, in
 * commit order). The result is built under a temp name and renamed into place.
 */
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Context, Data, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { type Catalog } from "@cairn/catalog/Catalog"
import { canonicalJson } from "@cairn/catalog/Digest"
import * as Backup from "./Backup.js"
import { restoreObjects } from "./ObjectBackup.js"
import { install } from "./Install.js"
import { fsyncDirectory, fsyncFile, ownedTempNameFor, publish, sha256File, sweepStaleTemps } from "./internal/files.js"
import * as Layout from "./Layout.js"
import { Registry } from "./Registry.js"
import { StoreConfig } from "./StoreConfig.js"
import { Change, commitsTable, compactionTable, receiptsTable } from "./Log.js"
import { CommitRecord, ReceiptRecord } from "./Archive.js"

/** A commit position, or an instant (the last commit made at or before it). */
export type Target = { readonly position: number } | { readonly time: string }

export interface RestoreOptions {
  /** Directory holding the backups (`Backup.backupDatabase`'s `to`). */
  readonly from: string
  /** Data directory the restored file is written into, at `databases/<databaseId>.sqlite`. */
  readonly dataDir: string
  readonly databaseId: string
  /** The running deployment's identity: a backup of another deployment is refused. */
  readonly deploymentId: string
  /** The running deployment's compiled catalog: a backup it cannot read is refused. */
  readonly catalog: Catalog
  /** Absent: the newest backup as it is. */
  readonly to?: Target | undefined
  /**
   * The later log commits after the backup are re-applied from. Default: the data
   * directory's database file if it exists, else the newest backup in `from`.
   */
  readonly log?: string | undefined
  /** Replace an existing database file (moved aside, never deleted). */
  readonly force?: boolean | undefined
  /**
   * The registry of the server running on `dataDir`, when it restores online (`DatabaseAdmin.restore`,
   * the database held): absent, the restore takes the data directory's lock (the server stopped).
   */
  readonly registry?: Registry | undefined
}

export interface Restored {
  /** The backup restored from, its position and last commit time as read from its file. */
  readonly manifest: Backup.Manifest
  /** The restored file's last committed position. */
  readonly position: number
  /** Commits re-applied from the later log after the backup. */
  readonly replayed: number
  readonly file: string
  /** Where an existing database file was moved to (with `force`). */
  readonly replaced?: string | undefined
}

/** Operator-facing: the restore was refused before anything was replaced; says what differs (never secrets). */
export class RestoreRefused extends Data.TaggedError("RestoreRefused")<{ readonly reason: string }> {
  override get message(): string {
    return `Restore refused: ${this.reason}`
  }
}

/** Operator-facing: an I/O or storage fault; nothing was replaced. */
export class RestoreError extends Data.TaggedError("RestoreError")<{ readonly reason: string; readonly cause?: unknown }> {
  override get message(): string {
    const cause = this.cause instanceof Error ? `: ${this.cause.message}` : ""
    return `Restore failed: ${this.reason}${cause}`
  }
}

const refuse = (reason: string) => Effect.fail(new RestoreRefused({ reason }))

/** A full `_cairn_commits` row, copied verbatim into the restored log once its changes are applied. */
const LogRow = CommitRecord
const decodeChanges = Schema.decodeUnknown(Schema.parseJson(Schema.Array(Change)))
const ReceiptRow = ReceiptRecord

const pageSize = 500

/**
 * Runs a query of the log on the log's own connection even inside the restored file's
 * transaction: `@effect/sql` keeps the open transaction's connection in one context tag
 * that every client would otherwise use.
 */
const outside = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(effect, (context: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(context))

/** What restore needs of the later log: its head, compaction watermark and commits. */
const openLog = (sql: SqlClient.SqlClient) => {
  const scalar = (text: string, params: ReadonlyArray<unknown> = []) =>
    Effect.map(sql.unsafe<{ readonly v: number | null }>(text, params), (rows) => Number(rows[0]?.v ?? 0))
  const log = {
    head: scalar(`SELECT coalesce(max(position), 0) AS v FROM ${commitsTable}`),
    watermark: Effect.catchAll(scalar(`SELECT coalesce(max(watermark), 0) AS v FROM ${compactionTable}`), () => Effect.succeed(0)),
    /** The last position committed at or before `time` (0 when none). */
    positionAt: (time: string) => scalar(`SELECT coalesce(max(position), 0) AS v FROM ${commitsTable} WHERE committed_at <= ?`, [time]),
    invocationAt: SqlSchema.findOne({
      Request: Schema.Number,
      Result: Schema.Struct({ invocation_id: Schema.String }),
      execute: (position) => sql`SELECT invocation_id FROM ${sql(commitsTable)} WHERE position = ${position}`
    }),
    commits: SqlSchema.findAll({
      Request: Schema.Struct({ after: Schema.Number, through: Schema.Number }),
      Result: LogRow,
      execute: (r) =>
        sql`SELECT * FROM ${sql(commitsTable)} WHERE position > ${r.after} AND position <= ${r.through} ORDER BY position LIMIT ${pageSize}`
    }),
    receipts: SqlSchema.findAll({
      Request: Schema.Struct({ after: Schema.Number, through: Schema.Number, time: Schema.NullOr(Schema.String) }),
      Result: ReceiptRow,
      // A rejection is recorded at the position it saw: those at the backup's position may postdate it.
      execute: (r) =>
        sql`SELECT invocation_id, intent, outcome, position, receipt FROM ${sql(receiptsTable)}
            WHERE (outcome = 'committed' AND position > ${r.after} AND position <= ${r.through})
               OR (outcome = 'rejected' AND position >= ${r.after} AND position <= ${r.through}
                   AND (${r.time} IS NULL OR json_extract(receipt, '$.committedAt') <= ${r.time}))`
    })
  }
  return {
    ...log,
    commits: (request: Parameters<typeof log.commits>[0]) => outside(log.commits(request)),
    receipts: (request: Parameters<typeof log.receipts>[0]) => outside(log.receipts(request))
  }
}

type Log = ReturnType<typeof openLog>

/**
 * Where `replay` reads the commits it re-applies: a later copy of the log (restore), or an archive's
 * segments (cluster rebuild and point-in-time restore). `commits` answers the next page in
 * `(after, through]` in position order; `receipts` the decisions of that span the source holds
 * (a rejection keeps the position it saw, so which ones belong is the source's to say).
 */
export interface LogSource<E> {
  readonly commits: (request: { readonly after: number; readonly through: number }) => Effect.Effect<ReadonlyArray<CommitRecord>, E>
  readonly receipts: (request: {
    readonly after: number
    readonly through: number
    readonly time: string | null
  }) => Effect.Effect<ReadonlyArray<ReceiptRecord>, E>
}

/**
 * Applies the log's commits in `(after, through]` to `sql` (the restored file, in a
 * transaction): each change's before image must be what the file holds, its after image
 * is written, then the commit row is copied; then the receipts decided in that span.
 * Refuses (`RestoreRefused`) a gap, an entity the catalog does not define, or a before image
 * the file does not hold: the log and the file are of different histories.
 */
export const replay = <E>(sql: SqlClient.SqlClient, log: LogSource<E>, catalog: Catalog, after: number, through: number, time: string | null) =>
  Effect.gen(function* () {
    let at = after
    let replayed = 0
    while (at < through) {
      const rows = yield* log.commits({ after: at, through })
      if (rows.length === 0) break
      for (const row of rows) {
        if (row.position !== at + 1) return yield* refuse(`the log has no commit at position ${at + 1}`)
        const changes = yield* decodeChanges(row.changes)
        for (const change of changes) {
          const entity = catalog.entity(change.entity)
          if (!entity) {
            return yield* refuse(`commit ${row.position} of the log changes entity "${change.entity}", which the deployment's catalog does not define`)
          }
          const table = Layout.tableName(entity)
          const current = yield* sql.unsafe<Record<string, unknown>>(`SELECT * FROM ${table} WHERE "id" = ?`, [change.id])
          const held = current[0] ? canonicalJson(Layout.decodeRecord(entity, current[0])) : null
          const expected = change.before ? canonicalJson(Layout.decodeRecord(entity, Layout.encodeRecord(entity, change.before))) : null
          if (held !== expected) {
            return yield* refuse(
              `commit ${row.position} of the log does not continue the backup (${change.entity} ${change.id} differs from its before image): the log and the backup are of different histories`
            )
          }
          if (change.after === null) yield* sql.unsafe(`DELETE FROM ${table} WHERE "id" = ?`, [change.id])
          else yield* sql`INSERT OR REPLACE INTO ${sql(entity.name)} ${sql.insert(Layout.encodeRecord(entity, change.after))}`
        }
        yield* sql`INSERT INTO ${sql(commitsTable)} ${sql.insert(row)}`
        at = row.position
        replayed += 1
      }
    }
    if (at !== through) return yield* refuse(`the log ends at position ${at}, before the target ${through}`)
    const receipts = yield* log.receipts({ after, through, time })
    for (const receipt of receipts) yield* sql`INSERT OR IGNORE INTO ${sql(receiptsTable)} ${sql.insert(receipt)}`
    return replayed
  })

/**
 * Restores one database into `dataDir`. Without `to`, the newest valid backup as it is.
 * With `to`, the newest valid backup at or before the target, then the later log's
 * commits up to the target. Refuses (`RestoreRefused`, nothing replaced) a backup of
 * another deployment, one whose catalog the deployment's cannot read, a backup whose
 * bytes do not match its manifest, a target the log cannot reach or whose change images
 * were compacted away, and an existing database file without `force`.
 */
export const restore = Effect.fn("Restore.restore")(function* (options: RestoreOptions) {
  const { databaseId, catalog } = options
  const destination = Backup.databaseFile(options.dataDir, databaseId)
  if (existsSync(destination) && !options.force) {
    return yield* refuse(`database ${databaseId} already exists in ${options.dataDir}; stop the server and pass force to replace it (the old file is kept aside), or restore it online: run the server with CAIRN_METRICS_PORT set (its operator listener) and restore again`)
  }
  const found = yield* Backup.list(options.from, databaseId)
  if (found.length === 0) {
    return yield* refuse(`no complete backup of database ${databaseId} in ${options.from} (a backup without its manifest is never used)`)
  }
  const newest = found[found.length - 1]!
  const fault = (reason: string) => (cause: unknown) => new RestoreError({ reason, cause })

  return yield* Effect.scoped(
    Effect.gen(function* () {
      // The data directory's lock, as a server holds it: never restore under a running server.
      const registry = options.registry ?? (yield* Layer.build(Registry.Default.pipe(Layer.provide(StoreConfig.layer({ dataDir: options.dataDir })))).pipe(
        Effect.map((context) => Context.get(context, Registry)),
        Effect.catchAll((error): Effect.Effect<never, RestoreRefused | RestoreError> =>
          error._tag === "DataDirectoryLocked"
            ? refuse(`another Cairn process is using ${options.dataDir}: stop the server before restoring into its data directory`)
            : Effect.fail(new RestoreError({ reason: "cannot open the data directory's registry", cause: error }))
        )
      ))
      // The later log, if the target may lie beyond a backup.
      let log: Log | undefined
      let target: number | undefined
      let time: string | null = null
      // The log's connection closes before any file is moved: it may be the file being replaced.
      const logScope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(logScope, Exit.void))
      if (options.to !== undefined) {
        const path = options.log ?? (existsSync(destination) ? destination : newest.path)
        if (!existsSync(path)) return yield* refuse(`no log at ${path}`)
        const asBackup = found.find((f) => f.path === path)
        if (asBackup && (yield* Effect.try({ try: () => sha256File(path), catch: fault("cannot read the log") })) !== asBackup.manifest.sha256) {
          return yield* refuse(`the backup file ${asBackup.manifest.file} (the log to replay from) does not match its manifest: it is partial or damaged`)
        }
        const isBackup = asBackup !== undefined
        const client = yield* SqliteClient.make({ filename: path, readonly: true, ...(isBackup ? { disableWAL: true } : {}) }).pipe(
          Scope.extend(logScope)
        )
        log = openLog(client)
        if ("position" in options.to) target = options.to.position
        else {
          const instant = new Date(options.to.time)
          if (Number.isNaN(instant.getTime())) return yield* refuse(`"${options.to.time}" is not a time`)
          time = instant.toISOString()
          target = yield* log.positionAt(time)
        }
      }
      const candidates = target === undefined ? found : found.filter((f) => f.manifest.position <= target)
      const chosen = candidates[candidates.length - 1]
      if (!chosen) {
        return yield* refuse(`no backup of database ${databaseId} at or before position ${target}; the oldest is at ${found[0]!.manifest.position}`)
      }
      const manifest = chosen.manifest
      if (manifest.deploymentId !== options.deploymentId) {
        return yield* refuse(`the backup ${manifest.file} belongs to deployment ${manifest.deploymentId}, this data directory is deployment ${options.deploymentId}`)
      }
      if (manifest.root !== catalog.name) {
        return yield* refuse(`the backup holds root schema "${manifest.root}", the deployment serves "${catalog.name}"`)
      }

      // Built under a temp name in the destination's directory, renamed into place once complete.
      // A killed restore's temps (its process gone) go first: the lock is held, nobody else writes here.
      yield* Effect.try({ try: () => mkdirSync(dirname(destination), { recursive: true }), catch: fault("cannot create the databases directory") })
      yield* Effect.try({ try: () => sweepStaleTemps(dirname(destination)), catch: fault("cannot clear the databases directory's stale temps") })
      const temp = `${ownedTempNameFor(destination)}.sqlite`
      yield* Effect.addFinalizer(() => Effect.sync(() => ["", "-wal", "-shm", "-journal"].forEach((s) => rmSync(temp + s, { force: true }))))
      yield* Effect.try({ try: () => copyFileSync(chosen.path, temp), catch: fault("cannot copy the backup") })
      const sha = yield* Effect.try({ try: () => sha256File(temp), catch: fault("cannot read the backup") })
      if (sha !== manifest.sha256) {
        return yield* refuse(`the backup file ${manifest.file} does not match its manifest (sha256 ${sha.slice(0, 12)}…, expected ${manifest.sha256.slice(0, 12)}…): it is partial or damaged`)
      }
      // The position is the file's, never the manifest's word: a manifest is plain text anyone can edit
      // (its sha256 covers the file, not itself).
      const held = yield* Backup.describeFile(temp).pipe(Effect.mapError(fault("the backup holds no install record")))
      const from = held.position
      if (from !== manifest.position) {
        yield* Effect.logWarning("a backup's manifest disagrees with its file; the file's position is used").pipe(
          Effect.annotateLogs({ database: databaseId, backup: manifest.file, manifest_position: manifest.position, file_position: from })
        )
        if (target !== undefined && from > target) {
          return yield* refuse(
            `the backup ${manifest.file} holds commits through position ${from}, though its manifest says ${manifest.position} (was it edited?); it is past the target ${target}: restore to a position of at least ${from}, or from an earlier backup`
          )
        }
      }
      const through = target ?? from
      if (log && through > from) {
        const head = yield* log.head
        if (head < through) return yield* refuse(`the log reaches position ${head}, before the target ${through}`)
        const watermark = yield* log.watermark
        if (watermark > from) {
          return yield* refuse(
            `the change images of commits ${from + 1}..${Math.min(watermark, through)} were compacted away; restore to a position at most ${from}, or from a backup taken at or after position ${watermark}`
          )
        }
        if (from > 0) {
          const same = yield* log.invocationAt(from)
          const backupHas = yield* Backup.invocationAt(temp, from)
          if (Option.isNone(same) || Option.getOrUndefined(backupHas) !== same.value.invocation_id) {
            return yield* refuse(`the log's commit ${from} is not the backup's: they are of different histories`)
          }
        }
      }

      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      const replayed = yield* Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* SqliteClient.make({ filename: temp, disableWAL: true })
          // The catalog check is installation's own: additive differences are applied, anything else refused.
          // A backup from before the registry has no install id: the restored file gets a new one.
          const { installId } = yield* install(sql, catalog, databaseId, now, crypto.randomUUID()).pipe(
            Effect.catchTag("IncompatibleCatalog", (e) =>
              refuse(
                `the backup's catalog (token ${manifest.catalogToken}, fingerprint ${manifest.fingerprint.slice(0, 16)}…) is not one the deployment's catalog (token ${catalog.token}, fingerprint ${catalog.fingerprint.slice(0, 16)}…) can read:\n- ${e.problems.join("\n- ")}`
              )
            )
          )
          const n = log && through > from ? yield* sql.withTransaction(replay(sql, log, catalog, from, through, time)) : 0
          yield* sql.unsafe("PRAGMA journal_mode = DELETE")
          return { n, installId }
        })
      )
      yield* Scope.close(logScope, Exit.void)
      // The objects first: once the file is in place, every object it references is stored.
      yield* restoreObjects(options.from, options.dataDir, databaseId).pipe(Effect.mapError(fault("cannot copy the objects back")))
      const replaced = yield* Effect.try({
        try: () => {
          fsyncFile(temp)
          let aside: string | undefined
          if (existsSync(destination)) {
            // Moved aside with its WAL, never deleted: the operator decides when it can go.
            aside = `${destination}.replaced-${Date.parse(now)}`
            for (const suffix of ["-wal", "-shm"]) if (existsSync(destination + suffix)) renameSync(destination + suffix, aside + suffix)
            renameSync(destination, aside)
            fsyncDirectory(dirname(destination))
          }
          publish(temp, destination)
          return aside
        },
        catch: fault("cannot move the restored file into place")
      })
      // The registry now names the restored file, at its (possibly earlier) position.
      const registered = yield* registry.lookup(databaseId)
      yield* registry.restored({
        id: databaseId,
        install_id: replayed.installId,
        created_at: Option.match(registered, { onNone: () => now, onSome: (r) => r.created_at }),
        position: through
      })
      yield* Effect.logInfo("database restored").pipe(
        Effect.annotateLogs({ database: databaseId, backup: manifest.file, position: through, replayed: replayed.n })
      )
      // The backup as its file has it (an edited manifest's position is not repeated to the operator).
      return { manifest: { ...manifest, position: from, committedAt: held.committedAt }, position: through, replayed: replayed.n, file: destination, replaced } satisfies Restored
    })
  ).pipe(
    Effect.provide(Reactivity.layer),
    Effect.catchTags({
      SqlError: (e) => Effect.fail(new RestoreError({ reason: "storage fault", cause: e })),
      ParseError: (e) => Effect.fail(new RestoreError({ reason: "a log row does not decode", cause: e }))
    })
  )
})

/**
 * The durable registry of the databases this deployment created (`registry.sqlite` in the
 * data directory): each database's id, identity (install id), creation time and last known
 * committed position. Its connection holds SQLite's exclusive lock for the process's
 * lifetime, so it is also the data directory's lock: one Cairn process per directory.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlError, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Data, Effect, Option, Schema, type Scope } from "effect"
import { StoreConfig } from "./StoreConfig.js"

/** Startup failure: another process (or another assembly in this one) holds the data directory. */
export class DataDirectoryLocked extends Data.TaggedError("DataDirectoryLocked")<{
  readonly directory: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `another Cairn process is using ${this.directory} (its registry.sqlite is locked); stop it, or give this one another CAIRN_DATA_DIR`
  }
}

/**
 * A new database refused: the deployment holds `CAIRN_MAX_DATABASES` already. Nothing was created
 * (no file, no registration); the databases that exist are untouched.
 */
export class DatabaseLimitReached extends Data.TaggedError("DatabaseLimitReached")<{
  readonly limit: number
}> {
  override get message(): string {
    return `this deployment holds ${this.limit} databases, its limit (CAIRN_MAX_DATABASES): a new one was refused, nothing was created; raise the setting if the machine has room`
  }
  /** What the caller is told (no number, no setting: those are the operator's). */
  get publicMessage(): string {
    return "This deployment cannot create another database now (its operator's limit is reached), so your request was not served and nothing was stored. Ask the operator to raise the limit; retrying does not help until then."
  }
}

/** One registered database. */
export const Registration = Schema.Struct({
  id: Schema.String,
  /** Random, also stored in the database's own install record: a swapped file is detected. */
  install_id: Schema.String,
  created_at: Schema.String,
  /** A lower bound of its committed position: a file behind it was rolled back. */
  position: Schema.Number
})
export type Registration = typeof Registration.Type

const table = "cairn_databases"

const ddl = [
  `CREATE TABLE IF NOT EXISTS ${table} (
    id TEXT PRIMARY KEY NOT NULL,
    install_id TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    position INTEGER NOT NULL,
    updated_at TEXT NOT NULL
  ) STRICT, WITHOUT ROWID`,
  // The data directory's identity (see `DataDirectory`), also in its identity file and in every database file.
  `CREATE TABLE IF NOT EXISTS cairn_directory (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    directory_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    -- Databases ever registered: a registry emptied of its rows (identity kept) is still a lost one.
    registered_ever INTEGER NOT NULL DEFAULT 0
  ) STRICT`,
  // The process holding the directory, for the operator (the lock itself is SQLite's).
  `CREATE TABLE IF NOT EXISTS cairn_holder (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL
  ) STRICT`
]

const isBusy = (error: SqlError.SqlError) => {
  const code = (error.cause as { readonly code?: unknown } | undefined)?.code
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED"
}

export class Registry extends Effect.Service<Registry>()("@cairn/store/Registry", {
  scoped: Effect.gen(function* () {
    const config = yield* StoreConfig
    const directory = config.dataDir
    yield* Effect.orDie(Effect.try(() => mkdirSync(directory, { recursive: true })))
    const sql = yield* SqliteClient.make({ filename: join(directory, "registry.sqlite"), disableWAL: true }).pipe(
      Effect.provide(Reactivity.layer)
    )
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())
    // A rollback journal in exclusive locking mode: the first write takes the file's exclusive
    // lock and the connection keeps it until it closes, or the process dies (SIGKILL included).
    // No busy wait: a second process fails at once instead of hanging its startup.
    const startedAt = yield* now
    yield* Effect.gen(function* () {
      yield* sql.unsafe("PRAGMA busy_timeout = 0")
      yield* sql.unsafe("PRAGMA locking_mode = EXCLUSIVE")
      yield* sql.unsafe("PRAGMA synchronous = FULL")
      yield* sql.withTransaction(
        Effect.gen(function* () {
          for (const statement of ddl) yield* sql.unsafe(statement)
          yield* sql`INSERT INTO cairn_holder ${sql.insert({ id: 1, pid: process.pid, started_at: startedAt })}
            ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, started_at = excluded.started_at`
        })
      )
    }).pipe(
      // Even preparing a statement reads the schema, which the holder's lock forbids.
      Effect.catchAll((error) => (isBusy(error) ? Effect.fail(new DataDirectoryLocked({ directory, cause: error })) : Effect.die(error)))
    )

    const findById = SqlSchema.findOne({
      Request: Schema.String,
      Result: Registration,
      execute: (id) => sql`SELECT id, install_id, created_at, position FROM ${sql(table)} WHERE id = ${id}`
    })
    const findByInstall = SqlSchema.findOne({
      Request: Schema.String,
      Result: Registration,
      execute: (installId) => sql`SELECT id, install_id, created_at, position FROM ${sql(table)} WHERE install_id = ${installId}`
    })
    const insert = SqlSchema.void({
      Request: Schema.Struct({ ...Registration.fields, updated_at: Schema.String }),
      execute: (row) => sql`INSERT INTO ${sql(table)} ${sql.insert(row)}`
    })
    const raise = SqlSchema.void({
      Request: Schema.Struct({ id: Schema.String, position: Schema.Number, updated_at: Schema.String }),
      execute: (r) =>
        sql`UPDATE ${sql(table)} SET position = ${r.position}, updated_at = ${r.updated_at} WHERE id = ${r.id} AND position < ${r.position}`
    })

    const replace = SqlSchema.void({
      Request: Schema.Struct({ ...Registration.fields, updated_at: Schema.String }),
      execute: (row) =>
        sql`INSERT INTO ${sql(table)} ${sql.insert(row)} ON CONFLICT (id) DO UPDATE SET install_id = excluded.install_id, position = excluded.position, updated_at = excluded.updated_at`
    })

    /** Databases registered, and new ones being created now (see `reserve`). */
    const counted = yield* Effect.orDie(sql<{ readonly n: number }>`SELECT count(*) AS n FROM ${sql(table)}`)
    let registered = Number(counted[0]?.n ?? 0)
    let reserved = 0

    /**
     * A place for one new database under `limit` (registered ones and those being created count), or
     * `DatabaseLimitReached`. Answers its release, to call once the database is registered (or given up);
     * the scope releases it too, at the latest. Synchronous: two creations never both take the last place.
     */
    const reserve = (limit: number): Effect.Effect<() => void, DatabaseLimitReached, Scope.Scope> =>
      Effect.flatMap(
        Effect.suspend(() => {
          if (registered + reserved >= limit) return Effect.fail(new DatabaseLimitReached({ limit }))
          reserved += 1
          let held = true
          return Effect.succeed(() => {
            if (held) {
              held = false
              reserved -= 1
            }
          })
        }),
        (release) => Effect.as(Effect.addFinalizer(() => Effect.sync(release)), release)
      )

    const identity = yield* Effect.orDie(
      sql<{ readonly directory_id: string; readonly registered_ever: number }>`SELECT directory_id, registered_ever FROM cairn_directory WHERE id = 1`
    )
    let directoryId: string | undefined = identity[0]?.directory_id
    const registeredEver = Number(identity[0]?.registered_ever ?? 0)

    /**
     * Records the data directory's identity (durably, before its identity file is written: see
     * `DataDirectory`), counting the databases registered now as the ones it ever had.
     */
    const identify = (id: string): Effect.Effect<void> =>
      Effect.flatMap(now, (created_at) =>
        sql`INSERT INTO cairn_directory (id, directory_id, created_at, registered_ever)
          VALUES (1, ${id}, ${created_at}, (SELECT count(*) FROM ${sql(table)}))
          ON CONFLICT (id) DO UPDATE SET directory_id = excluded.directory_id, registered_ever = excluded.registered_ever`
      ).pipe(
        Effect.orDie,
        Effect.tap(() => Effect.sync(() => (directoryId = id)))
      )

    /** The registered database `id`, if this deployment created it. */
    const lookup = (id: string): Effect.Effect<Option.Option<Registration>> => Effect.orDie(findById(id))

    /** The database holding `installId`, if any (a file of another database carries its id). */
    const owner = (installId: string): Effect.Effect<Option.Option<Registration>> => Effect.orDie(findByInstall(installId))

    /** Registers a new database durably (synchronous FULL) before its first commit can be acknowledged. */
    const register = (entry: Registration): Effect.Effect<void> =>
      Effect.flatMap(now, (updated_at) =>
        sql.withTransaction(
          Effect.zipRight(insert({ ...entry, updated_at }), sql`UPDATE cairn_directory SET registered_ever = registered_ever + 1 WHERE id = 1`)
        )
      ).pipe(
        Effect.orDie,
        Effect.tap(() => Effect.sync(() => (registered += 1)))
      )

    /** Raises the last known committed position of `id` (never lowers it). */
    const advance = (id: string, position: number): Effect.Effect<void> =>
      Effect.flatMap(now, (updated_at) => raise({ id, position, updated_at })).pipe(Effect.orDie)

    /**
     * An operator's restore: database `entry.id` is now the restored file, with its install id
     * and its position (lowered on purpose, the one case that may lower it).
     */
    const restored = (entry: Registration): Effect.Effect<void> =>
      Effect.flatMap(now, (updated_at) => sql.withTransaction(replace({ ...entry, updated_at }))).pipe(Effect.orDie)

    const findAll = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Registration,
      execute: () => sql`SELECT id, install_id, created_at, position FROM ${sql(table)} ORDER BY created_at, id`
    })
    /** Every registered database (for the operator's listing, `DatabaseAdmin.list`). */
    const all: Effect.Effect<ReadonlyArray<Registration>> = Effect.orDie(findAll(undefined))

    return {
      directory,
      lookup,
      owner,
      register,
      advance,
      restored,
      all,
      reserve,
      identify,
      /** The data directory's identity, once recorded (an older registry has none until `DataDirectory` runs). */
      directoryId: Effect.sync(() => directoryId),
      /** Databases registered. */
      registered: Effect.sync(() => registered),
      /** Databases ever registered since the identity was recorded, as this process started. */
      registeredEver: Effect.succeed(registeredEver)
    } as const
  })
}) {}

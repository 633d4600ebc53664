/**
 * One SQLite connection of a database file, two faces over the same handle: an @effect/sql
 * client (what everything else uses: install, verification, compaction, backup) and, for the
 * hot path only, raw prepared statements called synchronously with a statement cache of their
 * own. This is the one module per connection where raw better-sqlite3 calls are allowed.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import { Cache, Duration, Effect, Scope, Stream } from "effect"

/** Synchronous access to the connection: only for code that holds the connection (see `Raw.hold`). */
export interface Raw {
  /** A prepared statement for `text`, prepared once per connection. */
  readonly statement: (text: string) => Sqlite.Statement
  /** Runs statements without results (`BEGIN`, `SAVEPOINT s`, ...). */
  readonly exec: (text: string) => void
  /**
   * Rows as arrays of column values, from a cached statement in raw mode. Synchronous: run it
   * only while no transaction of the @effect/sql face is open (see `Raw.inTransaction`).
   */
  readonly values: (text: string, params: ReadonlyArray<unknown>) => ReadonlyArray<ReadonlyArray<unknown>>
  /** Whether a transaction is open on the connection. */
  readonly inTransaction: () => boolean
  /**
   * Holds the connection for the scope, exclusive with the @effect/sql client's transactions
   * (the same permit): synchronous sections run while it is held.
   */
  readonly hold: Effect.Effect<void, SqlError, Scope.Scope>
}

export interface Opened {
  readonly sql: Client.SqlClient
  readonly raw: Raw
}

export interface Options {
  readonly filename: string
  readonly readonly?: boolean
  /** SQLite's page cache of this connection at most, in KiB (`PRAGMA cache_size = -n`); SQLite's default when absent. */
  readonly cacheKib?: number
}

/** Opens the file (WAL), closed with the scope. Mirrors `@effect/sql-sqlite-node`'s client. */
export const open = (options: Options): Effect.Effect<Opened, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const compiler = Statement.makeCompilerSqlite()
    const db = new Sqlite(options.filename, { readonly: options.readonly ?? false })
    yield* Effect.addFinalizer(() => Effect.sync(() => db.close()))
    if (options.cacheKib !== undefined) db.pragma(`cache_size = -${Math.max(1, Math.floor(options.cacheKib))}`)
    db.pragma("journal_mode = WAL")

    const prepareCache = yield* Cache.make({
      capacity: 200,
      timeToLive: Duration.minutes(10),
      lookup: (text: string) =>
        Effect.try({ try: () => db.prepare(text), catch: (cause) => new SqlError({ cause, message: "Failed to prepare statement " }) })
    })
    const runStatement = (statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean) =>
      Effect.try({
        try: () => {
          if (statement.reader) return statement.all(...params) as ReadonlyArray<any>
          const result = statement.run(...params)
          return (raw ? result : []) as any
        },
        catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
      })
    const run = (text: string, params: ReadonlyArray<unknown>, raw = false) =>
      Effect.flatMap(prepareCache.get(text), (s) => runStatement(s, params, raw))

    const connection: Connection = {
      execute(text, params, transformRows) {
        return transformRows ? Effect.map(run(text, params), transformRows) : run(text, params)
      },
      executeRaw(text, params) {
        return run(text, params, true)
      },
      executeValues(text, params) {
        return Effect.acquireUseRelease(
          prepareCache.get(text),
          (statement) =>
            Effect.try({
              try: () => {
                if (statement.reader) {
                  statement.raw(true)
                  return statement.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
                }
                statement.run(...params)
                return []
              },
              catch: (cause) => new SqlError({ cause, message: "Failed to execute statement" })
            }),
          (statement) => Effect.sync(() => statement.reader && statement.raw(false))
        )
      },
      executeUnprepared(text, params, transformRows) {
        const effect = Effect.flatMap(
          Effect.try({ try: () => db.prepare(text), catch: (cause) => new SqlError({ cause, message: "Failed to prepare statement " }) }),
          (s) => runStatement(s, params ?? [], false)
        )
        return transformRows ? Effect.map(effect, transformRows) : effect
      },
      // better-sqlite3 reads synchronously: the rows are read at once, then streamed.
      executeStream(text, params, transformRows) {
        return Stream.flatMap(Stream.fromEffect(run(text, params)), (rows) =>
          Stream.fromIterable(transformRows ? transformRows(rows) : rows)
        )
      }
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    const acquirer = semaphore.withPermits(1)(Effect.succeed(connection))
    const hold = Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        restore(semaphore.take(1)),
        Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))
      )
    )
    const transactionAcquirer = Effect.as(hold, connection)
    const sql = yield* Client.make({
      acquirer,
      compiler,
      transactionAcquirer,
      spanAttributes: [["db.system.name", "sqlite"]]
    })

    const statements = new Map<string, Sqlite.Statement>()
    const valueStatements = new Map<string, Sqlite.Statement>()
    const raw: Raw = {
      statement: (text) => {
        let s = statements.get(text)
        if (s === undefined) {
          s = db.prepare(text)
          statements.set(text, s)
        }
        return s
      },
      values: (text, params) => {
        let s = valueStatements.get(text)
        if (s === undefined) {
          if (valueStatements.size >= 500) valueStatements.clear()
          s = db.prepare(text).raw(true)
          valueStatements.set(text, s)
        }
        return s.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
      },
      exec: (text) => void db.exec(text),
      inTransaction: () => db.inTransaction,
      hold
    }
    return { sql, raw }
  })

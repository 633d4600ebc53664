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
import { Duration, Effect, Scope, Stream } from "effect"

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
  /**
   * Holds the handle open for the scope (opening a lazy connection if needed), without excluding
   * anyone: for synchronous raw reads outside `hold`.
   */
  readonly lease: Effect.Effect<void, SqlError, Scope.Scope>
  /**
   * Drops the statements the @effect/sql face has cached (finalized once unreferenced): for the
   * one-time statements of an activation (install, verification, migrations), which would each keep
   * SQLite memory for as long as the connection is open.
   */
  readonly forget: () => void
  /** Whether the file is open now (a lazy connection is closed until used, and again once idle). */
  readonly isOpen: () => boolean
  /**
   * For a connection nobody is using (its database went idle): gives back the memory it rebuilds on
   * its next use, its prepared statements (finalized once unreferenced) and its page cache. SQLite
   * keeps every page a connection has read cached, up to `cache_size`, plus the cache's first block
   * of 20 pages (~90 KiB, whatever the file's size), for as long as the connection is open;
   * `PRAGMA shrink_memory` frees the unused pages and, once none is left, that block. An idle
   * database then costs its open handle, not its working set; its next use reads its pages back
   * from the OS's file cache. Does nothing while a transaction or a holder uses the connection.
   */
  readonly trim: () => void
}

export interface Opened {
  /** The @effect/sql face: built on first use (a lazy connection's again after `Raw.trim`). */
  readonly sql: Client.SqlClient
  readonly raw: Raw
  /** Whether the @effect/sql face exists now (see `sql`). */
  readonly faceBuilt: () => boolean
}

export interface Options {
  readonly filename: string
  readonly readonly?: boolean
  /** SQLite's page cache of this connection at most, in KiB (`PRAGMA cache_size = -n`); SQLite's default when absent. */
  readonly cacheKib?: number
  /**
   * Opens the file on first use instead of at once, and closes it again once nothing has held it
   * for this long (each statement and transaction of either face holds it while it runs).
   */
  readonly lazy?: {
    readonly idleClose: Duration.Duration
    /** Told when the file is opened (`true`) or closed again (`false`). */
    readonly onChange?: (open: boolean) => void
  }
}

const sqlError = (message: string) => (cause: unknown) => new SqlError({ cause, message })

/** SQLite's statement compiler: stateless, so one for every connection (not one each). */
const compiler = Statement.makeCompilerSqlite()
const spanAttributes: ReadonlyArray<readonly [string, unknown]> = [["db.system.name", "sqlite"]]

/** Opens the file (WAL), closed with the scope. Mirrors `@effect/sql-sqlite-node`'s client. */
export const open = (options: Options): Effect.Effect<Opened, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const reactivity = yield* Reactivity.Reactivity
    /** The handle while the file is open (always, unless `lazy`). */
    let handle: Sqlite.Database | undefined
    /** Statements prepared on the handle, by face: dropped with it. */
    const prepared = new Map<string, Sqlite.Statement>()
    const statements = new Map<string, Sqlite.Statement>()
    const valueStatements = new Map<string, Sqlite.Statement>()
    const connect = (): Sqlite.Database => {
      if (handle !== undefined) return handle
      const db = new Sqlite(options.filename, { readonly: options.readonly ?? false })
      try {
        if (options.cacheKib !== undefined) db.pragma(`cache_size = -${Math.max(1, Math.floor(options.cacheKib))}`)
        db.pragma("journal_mode = WAL")
      } catch (error) {
        db.close()
        throw error
      }
      handle = db
      options.lazy?.onChange?.(true)
      return db
    }
    const disconnect = () => {
      if (handle === undefined) return
      prepared.clear()
      statements.clear()
      valueStatements.clear()
      const db = handle
      handle = undefined
      db.close()
      options.lazy?.onChange?.(false)
    }

    // Holders of a lazy handle, and the idle close: one timer at a time, re-armed while the handle is used.
    let holders = 0
    let lastReleased = 0
    let timer: ReturnType<typeof setTimeout> | undefined
    const idleMillis = options.lazy === undefined ? 0 : Math.max(1, Duration.toMillis(options.lazy.idleClose))
    const closeWhenIdle = () => {
      timer = undefined
      if (holders > 0 || handle === undefined) return
      const left = lastReleased + idleMillis - performance.now()
      if (left > 0) arm(left)
      else disconnect()
    }
    const arm = (millis: number) => {
      timer = setTimeout(closeWhenIdle, millis)
      timer.unref?.()
    }
    // One finalizer for both: each `addFinalizer` keeps a closure and the fiber's refs for as long as the connection is open.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (timer !== undefined) clearTimeout(timer)
        disconnect()
      })
    )
    if (options.lazy === undefined) connect()
    /** Holds the handle (opening it if needed) for the scope: never closed while held. */
    const lease: Effect.Effect<void, SqlError, Scope.Scope> =
      options.lazy === undefined
        ? Effect.void
        : Effect.acquireRelease(
          Effect.try({
            try: () => {
              connect()
              holders += 1
            },
            catch: sqlError("Failed to open the database")
          }),
          () =>
            Effect.sync(() => {
              holders -= 1
              if (holders > 0) return
              lastReleased = performance.now()
              if (timer === undefined) arm(idleMillis)
            })
        )
    const db = () => {
      if (handle === undefined) throw new Error("connection used while closed")
      return handle
    }

    const prepare = (text: string) =>
      Effect.try({
        try: () => {
          let s = prepared.get(text)
          if (s === undefined) {
            if (prepared.size >= 200) prepared.clear()
            s = db().prepare(text)
            prepared.set(text, s)
          }
          return s
        },
        catch: sqlError("Failed to prepare statement ")
      })
    const runStatement = (statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean) =>
      Effect.try({
        try: () => {
          if (statement.reader) return statement.all(...params) as ReadonlyArray<any>
          const result = statement.run(...params)
          return (raw ? result : []) as any
        },
        catch: sqlError("Failed to execute statement")
      })
    const run = (text: string, params: ReadonlyArray<unknown>, raw = false) =>
      Effect.flatMap(prepare(text), (s) => runStatement(s, params, raw))

    /**
     * The @effect/sql face, built on first use (`Opened.sql`): a lazy connection's hot path is
     * `Raw.values`, and most open databases never run an @effect/sql statement on their read
     * connection, so it would only keep the face's closures (~17 KiB of heap) per open database.
     * A lazy connection drops it again once idle (see `trim`); a face still referenced keeps working,
     * since every face shares the handle and the one permit below.
     */
    let face: Client.SqlClient | undefined
    /** The permit of `hold` and of the face's transactions, made on first use (shared by every face). */
    let semaphore: Effect.Semaphore | undefined
    const permit = () => (semaphore ??= Effect.unsafeMakeSemaphore(1))
    const hold: Effect.Effect<void, SqlError, Scope.Scope> = Effect.uninterruptibleMask((restore) => {
      const s = permit()
      return Effect.zipRight(
        Effect.zipRight(
          restore(s.take(1)),
          Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, s.release(1)))
        ),
        lease
      )
    })
    const makeFace = (): Client.SqlClient => {
      const connection: Connection = {
        execute(text, params, transformRows) {
          return transformRows ? Effect.map(run(text, params), transformRows) : run(text, params)
        },
        executeRaw(text, params) {
          return run(text, params, true)
        },
        executeValues(text, params) {
          return Effect.acquireUseRelease(
            prepare(text),
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
                catch: sqlError("Failed to execute statement")
              }),
            (statement) => Effect.sync(() => statement.reader && statement.raw(false))
          )
        },
        executeUnprepared(text, params, transformRows) {
          const effect = Effect.flatMap(
            Effect.try({ try: () => db().prepare(text), catch: sqlError("Failed to prepare statement ") }),
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
      const s = permit()
      const acquirer = Effect.as(Effect.zipRight(s.withPermits(1)(Effect.void), lease), connection)
      // `Client.make` is synchronous (it only reads `Reactivity`): built in place, on the caller's turn.
      return Effect.runSync(
        Client.make({ acquirer, compiler, transactionAcquirer: Effect.as(hold, connection), spanAttributes }).pipe(
          Effect.provideService(Reactivity.Reactivity, reactivity)
        )
      )
    }
    const sqlFace = () => (face ??= makeFace())
    if (options.lazy === undefined) sqlFace()

    const raw: Raw = {
      statement: (text) => {
        let s = statements.get(text)
        if (s === undefined) {
          s = db().prepare(text)
          statements.set(text, s)
        }
        return s
      },
      values: (text, params) => {
        let s = valueStatements.get(text)
        if (s === undefined) {
          if (valueStatements.size >= 500) valueStatements.clear()
          s = db().prepare(text).raw(true)
          valueStatements.set(text, s)
        }
        return s.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
      },
      exec: (text) => void db().exec(text),
      inTransaction: () => handle !== undefined && handle.inTransaction,
      hold,
      lease,
      forget: () => prepared.clear(),
      isOpen: () => handle !== undefined,
      trim: () => {
        if (handle === undefined || handle.inTransaction || holders > 0) return
        // Nothing holds the connection: a lazy one's face is built again on its next use.
        if (options.lazy !== undefined) face = undefined
        prepared.clear()
        statements.clear()
        valueStatements.clear()
        // `exec`, not `pragma`: no statement object is left behind for the collector to finalize.
        try {
          handle.exec("PRAGMA shrink_memory")
        } catch {
          // Nothing is lost: the cache stays as it was, and the next use works as before.
        }
      }
    }
    return {
      get sql() {
        return sqlFace()
      },
      raw,
      faceBuilt: () => face !== undefined
    }
  })

/**
 * One read-only statement's rows (arrays of column values) as last committed, never an uncommitted
 * write: on the write connection while no transaction is open on it (its writer's groups run
 * synchronously, so none is ever open between them), else on the read connection, held open for the
 * read (waiting behind a transaction of its @effect/sql face, whose snapshot a raw read would see).
 */
export const committedValues = (
  writer: Opened,
  reader: Opened,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, unknown> =>
  Effect.suspend(() => {
    if (!writer.raw.inTransaction()) return Effect.try(() => writer.raw.values(text, params))
    if (reader.raw.inTransaction()) return reader.sql.unsafe(text, params as Array<any>).values
    return Effect.scoped(Effect.zipRight(reader.raw.lease, Effect.try(() => reader.raw.values(text, params))))
  })

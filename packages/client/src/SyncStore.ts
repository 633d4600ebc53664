/**
 * The sync client's local SQLite file: the snapshot's records, the checkpoint they are
 * current to, and a staging area for a snapshot still arriving. Every change to records
 * happens in one transaction with the checkpoint it leads to, so a crash at any moment
 * leaves records and cursor in step.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, type SqlError } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import type { SyncChange, SyncCheckpoint, SyncRecord } from "@cairn/domain/Sync"
import { Context, Effect, Layer, Option, type Scope, type Stream } from "effect"
import type { LocalRecord, StagedSnapshot, StoredState } from "./LocalStore.js"

/** What a stored snapshot belongs to: checked before the data is used. */
export interface StoredIdentity {
  readonly subject: string
  readonly database: string
}

export type { LocalRecord, StagedSnapshot, StoredState } from "./LocalStore.js"

export interface SyncStoreShape {
  readonly state: Effect.Effect<Option.Option<StoredState>, SqlError.SqlError>
  readonly staged: Effect.Effect<Option.Option<StagedSnapshot>, SqlError.SqlError>
  /** Applies a batch and its checkpoint in one transaction. */
  readonly apply: (changes: ReadonlyArray<SyncChange>, checkpoint: SyncCheckpoint) => Effect.Effect<void, SqlError.SqlError>
  /** Starts staging a new snapshot (dropping any staged one); local records stay readable. */
  readonly beginSnapshot: (scopeKey: string) => Effect.Effect<void, SqlError.SqlError>
  /** Stages one page together with the continuation that follows it. */
  readonly stagePage: (records: ReadonlyArray<SyncRecord>, next: string) => Effect.Effect<void, SqlError.SqlError>
  /** Stages the last page and swaps the staged snapshot in for the records, with its checkpoint. */
  readonly commitSnapshot: (
    scopeKey: string,
    records: ReadonlyArray<SyncRecord>,
    checkpoint: SyncCheckpoint
  ) => Effect.Effect<void, SqlError.SqlError>
  /** Forgets everything: records, checkpoint and staged pages. */
  readonly discard: Effect.Effect<void, SqlError.SqlError>
  /** The records of one entity, ordered by id. */
  readonly records: (entity: string) => Effect.Effect<ReadonlyArray<LocalRecord>, SqlError.SqlError>
  /** Every record, keyed `entity/id`: what tests compare against an oracle. */
  readonly dump: Effect.Effect<ReadonlyMap<string, Readonly<Record<string, unknown>>>, SqlError.SqlError>
  /** `records(entity)` again after every local change that touches the entity. */
  readonly watch: (entity: string) => Stream.Stream<ReadonlyArray<LocalRecord>, SqlError.SqlError>
}

const ddl = [
  `CREATE TABLE IF NOT EXISTS sync_records (entity TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS sync_staging (entity TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS sync_checkpoint (one INTEGER PRIMARY KEY CHECK (one = 1), scope_key TEXT NOT NULL, cursor TEXT NOT NULL, subject TEXT NOT NULL, database TEXT NOT NULL, catalog_token TEXT NOT NULL, position TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS sync_staged (one INTEGER PRIMARY KEY CHECK (one = 1), scope_key TEXT NOT NULL, next TEXT)`
]

// SQLite binds at most 32766 parameters per statement; 3 per row leaves room.
const CHUNK = 2000

interface CheckpointRow {
  readonly scope_key: string
  readonly cursor: string
  readonly subject: string
  readonly database: string
  readonly catalog_token: string
  readonly position: string
}

/** A store over an open SQL client (the file's only connection). */
const make = Effect.fn("SyncStore.make")(function* () {
  const sql = yield* SqlClient.SqlClient
  const reactivity = yield* Reactivity.Reactivity
  for (const statement of ddl) yield* sql.unsafe(statement)

  // One key per entity (array form: a record form would also fire every watcher of the table).
  const keysOf = (entities: Iterable<string>) => [...new Set(entities)].map((e) => `sync-records:${e}`)
  const allEntities = Effect.map(
    sql<{ entity: string }>`SELECT DISTINCT entity FROM sync_records`,
    (rows) => rows.map((r) => r.entity)
  )

  const insertInto = (table: "sync_records" | "sync_staging", records: ReadonlyArray<SyncRecord>) =>
    Effect.forEach(
      chunks(records, CHUNK),
      (chunk) =>
        sql`INSERT INTO ${sql(table)} ${sql.insert(
          chunk.map((r) => ({ entity: r.entity, id: r.id, record: JSON.stringify(r.record) }))
        )} ON CONFLICT (entity, id) DO UPDATE SET record = excluded.record`,
      { discard: true }
    )

  const writeCheckpoint = (scopeKey: string, c: SyncCheckpoint) =>
    sql`INSERT INTO sync_checkpoint ${sql.insert({
      one: 1,
      scope_key: scopeKey,
      cursor: c.cursor,
      subject: c.subject,
      database: c.database,
      catalog_token: c.catalogToken,
      position: c.position
    })} ON CONFLICT (one) DO UPDATE SET scope_key = excluded.scope_key, cursor = excluded.cursor, subject = excluded.subject,
      database = excluded.database, catalog_token = excluded.catalog_token, position = excluded.position`

  const state = Effect.map(
    sql<CheckpointRow>`SELECT scope_key, cursor, subject, database, catalog_token, position FROM sync_checkpoint`,
    (rows): Option.Option<StoredState> =>
      rows.length === 0
        ? Option.none()
        : Option.some({
            scopeKey: rows[0]!.scope_key,
            checkpoint: {
              cursor: rows[0]!.cursor,
              subject: rows[0]!.subject,
              database: rows[0]!.database,
              catalogToken: rows[0]!.catalog_token,
              position: rows[0]!.position
            }
          })
  )

  const staged = Effect.map(
    sql<{ scope_key: string; next: string | null }>`SELECT scope_key, next FROM sync_staged`,
    (rows): Option.Option<StagedSnapshot> =>
      rows.length === 0 || rows[0]!.next === null ? Option.none() : Option.some({ scopeKey: rows[0]!.scope_key, next: rows[0]!.next })
  )

  const apply = (changes: ReadonlyArray<SyncChange>, checkpoint: SyncCheckpoint) =>
    Effect.gen(function* () {
      const current = yield* state
      if (Option.isNone(current)) return yield* Effect.dieMessage("SyncStore.apply: no snapshot to apply changes to")
      // Consecutive upserts go in multi-row statements; order across removals is kept.
      let run: Array<SyncRecord> = []
      for (const change of changes) {
        if (change._tag === "Upsert") {
          run.push(change)
          continue
        }
        yield* insertInto("sync_records", run)
        run = []
        yield* sql`DELETE FROM sync_records WHERE entity = ${change.entity} AND id = ${change.id}`
      }
      yield* insertInto("sync_records", run)
      yield* writeCheckpoint(current.value.scopeKey, checkpoint)
    }).pipe(
      sql.withTransaction,
      Effect.tap(() => reactivity.invalidate(keysOf(changes.map((c) => c.entity)))),
      Effect.withSpan("SyncStore.apply")
    )

  const beginSnapshot = (scopeKey: string) =>
    Effect.gen(function* () {
      yield* sql`DELETE FROM sync_staging`
      yield* sql`INSERT INTO sync_staged ${sql.insert({ one: 1, scope_key: scopeKey, next: null })}
        ON CONFLICT (one) DO UPDATE SET scope_key = excluded.scope_key, next = NULL`
    }).pipe(sql.withTransaction)

  const stagePage = (records: ReadonlyArray<SyncRecord>, next: string) =>
    Effect.gen(function* () {
      yield* insertInto("sync_staging", records)
      yield* sql`UPDATE sync_staged SET next = ${next}`
    }).pipe(sql.withTransaction)

  const commitSnapshot = (scopeKey: string, records: ReadonlyArray<SyncRecord>, checkpoint: SyncCheckpoint) =>
    Effect.gen(function* () {
      yield* insertInto("sync_staging", records)
      const before = yield* allEntities
      yield* sql`DELETE FROM sync_records`
      yield* sql`INSERT INTO sync_records (entity, id, record) SELECT entity, id, record FROM sync_staging`
      yield* sql`DELETE FROM sync_staging`
      yield* sql`DELETE FROM sync_staged`
      yield* writeCheckpoint(scopeKey, checkpoint)
      return [...before, ...(yield* allEntities)]
    }).pipe(
      sql.withTransaction,
      Effect.flatMap((entities) => reactivity.invalidate(keysOf(entities))),
      Effect.withSpan("SyncStore.commitSnapshot")
    )

  const discard = Effect.gen(function* () {
    const before = yield* allEntities
    yield* sql`DELETE FROM sync_records`
    yield* sql`DELETE FROM sync_staging`
    yield* sql`DELETE FROM sync_staged`
    yield* sql`DELETE FROM sync_checkpoint`
    return before
  }).pipe(
    sql.withTransaction,
    Effect.flatMap((entities) => reactivity.invalidate(keysOf(entities)))
  )

  const records = (entity: string) =>
    Effect.map(
      sql<{ id: string; record: string }>`SELECT id, record FROM sync_records WHERE entity = ${entity} ORDER BY id`,
      (rows): ReadonlyArray<LocalRecord> => rows.map((r) => ({ id: r.id, record: JSON.parse(r.record) }))
    )

  const dump = Effect.map(
    sql<{ entity: string; id: string; record: string }>`SELECT entity, id, record FROM sync_records`,
    (rows) => new Map(rows.map((r) => [`${r.entity}/${r.id}`, JSON.parse(r.record) as Record<string, unknown>]))
  )

  const watch = (entity: string) => sql.reactive(keysOf([entity]), records(entity))

  return {
    state,
    staged,
    apply,
    beginSnapshot,
    stagePage,
    commitSnapshot,
    discard,
    records,
    dump,
    watch
  } satisfies SyncStoreShape
})

const chunks = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Opens (creating if needed) the local file as the store's only connection. */
const open = (filename: string): Effect.Effect<SyncStoreShape, SqlError.SqlError, Scope.Scope> =>
  Effect.gen(function* () {
    const reactivity = yield* Reactivity.make
    const sql = yield* SqliteClient.make({ filename }).pipe(Effect.provideService(Reactivity.Reactivity, reactivity))
    return yield* make().pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.provideService(Reactivity.Reactivity, reactivity)
    )
  })

export class SyncStore extends Context.Tag("@cairn/client/SyncStore")<SyncStore, SyncStoreShape>() {
  static readonly make = make
  static readonly open = open
  static readonly layer = (filename: string) => Layer.scoped(SyncStore, open(filename))
}

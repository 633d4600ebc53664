/**
 * Followed copies: the databases this process reads without writing them. Each copy is built from
 * the archive (newest snapshot + segments, `ArchiveReader.materialize`), then follows it: every
 * shipped group is announced on PostgreSQL's `cairn_archive` channel (one LISTEN per process), and a
 * poll catches what a lost notification missed. Queries, snapshots, live changes and downloads run
 * on a copy, never on the writer, so reads and sync scale with the processes that serve them.
 *
 * One copy per database per process: an `RcMap` entry, held by each read while it runs and closed
 * after the store's idle timeout. A copy that no longer continues the archive (a restore started a new
 * generation, or a segment does not apply) is invalidated: its live streams end, their clients resume
 * from their cursors on a fresh copy (or take the resnapshot the new history asks for).
 */
import { mkdirSync, readdirSync, rmSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Config, Duration, Effect, Option, PubSub, RcMap, Schedule, type Scope, Stream, SubscriptionRef } from "effect"
import { type DatabaseId } from "@cairn/domain/Ids"
import { ArchiveFailed } from "@cairn/store/Archive"
import { type ReadableDatabase } from "@cairn/store/Database"
import { commitsTable, compactionTable } from "@cairn/store/Log"
import { ObjectStore } from "@cairn/store/ObjectStore"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import * as ArchiveReader from "../archive/ArchiveReader.js"
import { channel } from "../archive/ArchiveTables.js"
import * as Segment from "../archive/Segment.js"

/** How followed copies wait and poll (`CAIRN_READ_WAIT`, `CAIRN_FOLLOW_POLL_INTERVAL`). */
export const followConfig = Config.all({
  /** How long a read that asks for a position (`atLeast`, a sync cursor) waits for a copy to reach it before the writer answers instead. */
  readWait: Config.duration("CAIRN_READ_WAIT").pipe(Config.withDefault(Duration.millis(500))),
  /**
   * How often a copy asks the archive for new groups on its own. Notifications are what keep copies
   * current (every copy catches up when the LISTEN connection is made again, so none is missed while it
   * was down); the poll is a last resort, and with many copies per process a frequent one costs a
   * PostgreSQL query per copy per interval.
   */
  pollInterval: Config.duration("CAIRN_FOLLOW_POLL_INTERVAL").pipe(Config.withDefault(Duration.seconds(30)))
})

/** Wakes every copy (never a database id: those are hex digests). */
const everyCopy = "*"

/** A copy that follows the archive; `position` and `committed` advance as groups are applied. */
interface Copy {
  readonly database: ReadableDatabase
  /** Applies what the archive shipped since, now (one at a time). */
  readonly catchUp: Effect.Effect<void>
}

export class Followers extends Effect.Service<Followers>()("@cairn/cluster/Followers", {
  scoped: Effect.gen(function* () {
    const pg = yield* PgClient.PgClient
    const sql = yield* SqlClient.SqlClient
    const objects = yield* ObjectStore
    const store = yield* StoreConfig
    const { catalog } = yield* OperationCatalog
    const { readWait, pollInterval } = yield* followConfig
    const directory = join(store.dataDir, "replicas")
    // Copies are caches: whatever an earlier run left is rebuilt from the archive.
    yield* Effect.sync(() => {
      mkdirSync(directory, { recursive: true })
      for (const name of readdirSync(directory)) rmSync(join(directory, name), { force: true, recursive: true })
    })

    /** Ids of databases with newly shipped groups, from the one LISTEN of this process. */
    const shipped = yield* PubSub.sliding<string>(4096)
    yield* pg.listen(channel).pipe(
      // Once listening (again), every copy catches up: what shipped while no one listened is not lost.
      Stream.merge(Stream.fromEffect(Effect.as(Effect.sleep(Duration.seconds(1)), everyCopy)), { haltStrategy: "left" }),
      Stream.runForEach((payload) => PubSub.publish(shipped, payload === everyCopy ? everyCopy : payload.slice(0, payload.indexOf(":")))),
      Effect.tapErrorCause((cause) => Effect.logWarning("archive notifications lost; copies poll until they resume", cause)),
      Effect.retry(Schedule.spaced(Duration.seconds(1))),
      Effect.forkScoped
    )

    const provided = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | ObjectStore>) =>
      effect.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.provideService(ObjectStore, objects))

    /** Builds the copy of `id` in the entry's scope; fails when the archive has nothing (yet) or cannot be read. */
    const open = (id: DatabaseId): Effect.Effect<Copy, ArchiveFailed, Scope.Scope> =>
      Effect.gen(function* () {
        const filename = join(directory, `${id}.sqlite`)
        const built = yield* provided(ArchiveReader.materialize({ databaseId: id, catalog, into: filename }))
        // Added first, so it runs last: once both connections are closed, the copy is gone.
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            for (const suffix of ["", "-wal", "-shm"]) rmSync(filename + suffix, { force: true })
          })
        )
        const writer = yield* SqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer), Effect.orDie)
        const reader = yield* SqliteClient.make({ filename, readonly: true }).pipe(Effect.provide(Reactivity.layer), Effect.orDie)
        let seq = built.seq
        let position = built.position
        /** Out of the map for good (see `retire`): it follows nothing any more. */
        let retired = false
        const committed = yield* SubscriptionRef.make(position)
        const lock = yield* Effect.makeSemaphore(1)
        const self = yield* Effect.scope

        const catchUp = lock.withPermits(1)(
          Effect.gen(function* () {
            if (retired) return
            const head = yield* provided(ArchiveReader.head(id))
            if (Option.isNone(head)) return
            // Checked first: a new history starts again at seq 0.
            if (head.value.generation !== built.generation) return yield* new ArchiveFailed({ reason: "diverged", cause: new Error("a restore started a new history") })
            if (head.value.seq <= seq) return
            const rows = yield* provided(ArchiveReader.segmentsAfter(id, built.generation, seq, { throughSeq: head.value.seq }))
            if (rows.length === 0) return
            const contents = yield* provided(ArchiveReader.readSegments(rows))
            const reached = yield* writer.withTransaction(Segment.apply(writer, catalog, contents, position)).pipe(
              Effect.catchTag("SqlError", (e) => Effect.fail(new ArchiveFailed({ reason: "unavailable", cause: e })))
            )
            seq = contents[contents.length - 1]!.seq
            position = reached
            yield* SubscriptionRef.set(committed, position)
          })
        ).pipe(
          Effect.catchTag("ArchiveFailed", (failure) =>
            failure.reason === "unavailable"
              ? Effect.logWarning("a followed copy could not read the archive; it retries", failure.cause)
              : // Not this history any more: the next read builds a fresh copy, and the streams on this one are told to resnapshot.
                Effect.zipRight(Effect.logInfo("a followed copy no longer continues the archive; rebuilding"), Effect.zipRight(RcMap.invalidate(copies, id), retire))
          ),
          Effect.annotateLogs({ database: id })
        )

        /**
         * A copy out of the map is read only by what already holds it: its live streams, which must not
         * wait forever for commits of a history that has ended. A tombstone commit past its end and a
         * compaction watermark past that make every stream on it get a resnapshot (its history is gone)
         * at the next round, which the tombstone's position wakes. The file goes with its last holder.
         */
        const retire = lock.withPermits(1)(
          Effect.suspend(() => {
            if (retired) return Effect.void
            retired = true
            const tombstone = position + 1
            return writer
              .withTransaction(
                Effect.zipRight(
                  writer.unsafe(
                    `INSERT INTO ${commitsTable} (position, invocation_id, operation, target_entity, target_id, intent, subject, receipt, changes, committed_at) VALUES (?, 'retired', 'retired', NULL, NULL, '', '', '{}', '[]', ?)`,
                    [tombstone, new Date().toISOString()]
                  ),
                  writer.unsafe(`INSERT INTO ${compactionTable} (id, watermark) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET watermark = excluded.watermark`, [
                    tombstone
                  ])
                )
              )
              .pipe(
                Effect.zipRight(Effect.sync(() => (position = tombstone))),
                Effect.zipRight(SubscriptionRef.set(committed, tombstone)),
                Effect.catchAllCause((cause) => Effect.logWarning("a retired copy could not end its streams", cause))
              )
          })
        )

        const wakes = Stream.fromPubSub(shipped).pipe(Stream.filter((shippedId) => shippedId === id || shippedId === everyCopy))
        yield* Stream.merge(wakes, Stream.fromSchedule(Schedule.spaced(pollInterval))).pipe(
          // A defect of one catch-up is logged, and the next wake tries again: a copy never stops following silently.
          Stream.runForEach(() => Effect.catchAllDefect(catchUp, (defect) => Effect.logError("a followed copy failed to catch up", defect))),
          Effect.forkIn(self)
        )
        // Groups shipped between the build and the subscription above.
        yield* catchUp

        const database: ReadableDatabase = {
          id,
          catalog,
          reader,
          values: (text, params) => Effect.orDie(reader.unsafe(text, params).values),
          position: Effect.sync(() => position),
          committed
        }
        return { database, catchUp } satisfies Copy
      })

    const copies: RcMap.RcMap<DatabaseId, Copy, ArchiveFailed> = yield* RcMap.make({
      lookup: open,
      idleTimeToLive: store.idleTimeout
    })

    /**
     * The copy of `id` for a read in the current scope, once it holds `atLeast` (waiting up to
     * `CAIRN_READ_WAIT`); None when there is no copy at that position in time (the database has no
     * archive yet, the archive cannot be read now, or the copy is behind): the writer answers instead.
     */
    const read = (id: DatabaseId, atLeast: number): Effect.Effect<Option.Option<ReadableDatabase>, never, Scope.Scope> =>
      Effect.gen(function* () {
        // A copy that could not be built is not kept (RcMap would keep its failure until idle): the next read tries again.
        const copy = yield* RcMap.get(copies, id).pipe(Effect.tapError(() => RcMap.invalidate(copies, id)))
        const now = yield* copy.database.position
        if (now >= atLeast) return Option.some(copy.database)
        yield* copy.catchUp
        const reached = yield* copy.database.committed.changes.pipe(
          Stream.takeUntil((p) => p >= atLeast),
          Stream.runLast,
          Effect.timeout(readWait),
          Effect.option
        )
        return Option.flatten(reached).pipe(Option.filter((p) => p >= atLeast), Option.as(copy.database))
      }).pipe(Effect.catchAll(() => Effect.succeed(Option.none<ReadableDatabase>())))

    return { read } as const
  })
}) {}

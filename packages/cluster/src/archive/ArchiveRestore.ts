/**
 * Online point-in-time restore of one database from its archive: the file at the target (a position,
 * or the last position committed at or before an instant) is built from the newest snapshot before it
 * plus segments, given a new identity (install id and install time, so sync cursors of the old history
 * are told to resnapshot), and published as a new history: a new `generation` of the head (fenced CAS,
 * the epoch bumped so no earlier owner ships into it) whose base is a snapshot at the target. Its
 * caller (the database's entity) has closed the writer first and reopens it afterwards; the built file
 * is left as the local file with a sidecar, so that reopening keeps it instead of downloading it again.
 */
import { randomUUID } from "node:crypto"
import { createReadStream, existsSync, renameSync, rmSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Data, Effect, Option } from "effect"
import type { Catalog } from "@cairn/catalog/Catalog"
import { ArchiveFailed, namespaceOf } from "@cairn/store/Archive"
import { installTable } from "@cairn/store/Log"
import { ObjectStore, ObjectStoreError } from "@cairn/store/ObjectStore"
import * as ArchiveReader from "./ArchiveReader.js"
import { channel, type Head, heads, type SegmentRow, snapshots } from "./ArchiveTables.js"
import * as Sidecars from "../internal/sidecar.js"

/** A commit position, or an instant: the last position committed at or before it. */
export type Target = { readonly position: number } | { readonly time: string }

/** Operator-facing: the restore was refused and nothing changed; the reason says what to do instead. */
export class RestoreRefused extends Data.TaggedError("RestoreRefused")<{ readonly reason: string }> {
  override get message(): string {
    return `Restore refused: ${this.reason}`
  }
}

export interface RestoreOptions {
  readonly databaseId: string
  /** The deployment's catalog (the layout the segments are applied to). */
  readonly catalog: Catalog
  /** The local database file: replaced by the restored one (its writer is closed). */
  readonly filename: string
  readonly target: Target
}

export interface Restored {
  /** The position the database now ends at, and its new history. */
  readonly position: number
  readonly generation: number
  readonly installId: string
  /** Where it ended before. */
  readonly previousPosition: number
  readonly previousGeneration: number
}

const unavailable = (cause: unknown) => new ArchiveFailed({ reason: "unavailable", cause })
const refuse = (reason: string) => Effect.fail(new RestoreRefused({ reason }))

/** The first commit time in a segment (none for a group that only rejected). */
const firstCommitTime = (row: SegmentRow) =>
  Effect.map(ArchiveReader.readSegment(row), (segment) => segment.commits[0]?.committed_at)

/**
 * The last position of `head`'s history committed at or before `time`: a binary search over its
 * segments by their first commit's time (commit times follow positions: one writer's clock), then the
 * last commit at or before it in that segment. None when no reachable commit is that old.
 */
export const positionAt = (databaseId: string, head: Head, time: string) =>
  Effect.gen(function* () {
    const rows = (yield* ArchiveReader.segmentsAfter(databaseId, head.generation, 0, { throughSeq: head.seq })).filter(
      (r) => r.last_position > r.first_position
    )
    let lo = 0
    let hi = rows.length - 1
    let found = -1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const first = yield* firstCommitTime(rows[mid]!)
      if (first !== undefined && first <= time) {
        found = mid
        lo = mid + 1
      } else hi = mid - 1
    }
    if (found < 0) return Option.none<number>()
    const segment = yield* ArchiveReader.readSegment(rows[found]!)
    const last = segment.commits.filter((c) => c.committed_at <= time).at(-1)
    return Option.fromNullable(last?.position)
  })

/** Stores the file at `path` in the database's archive namespace; answers its digest and size. */
const putFile = (databaseId: string, path: string) =>
  Effect.flatMap(ObjectStore, (store) =>
    Effect.suspend(() => {
      const body = NodeStream.fromReadable<ObjectStoreError>(
        () => createReadStream(path, { highWaterMark: 1 << 20 }),
        (cause) => new ObjectStoreError({ cause })
      )
      return store.put(namespaceOf(databaseId), body, statSync(path).size)
    })
  )

/**
 * Restores `databaseId` to `target` as a new history of its archive (see the module's comment).
 * Refused, with nothing changed, for a database without an archive, a target past its head or before
 * its oldest kept snapshot, an instant before every reachable commit, or a head that moved meanwhile.
 */
export const restore = (options: RestoreOptions): Effect.Effect<Restored, RestoreRefused | ArchiveFailed, SqlClient.SqlClient | ObjectStore> =>
  Effect.gen(function* () {
    const { catalog, databaseId, filename } = options
    const sql = yield* SqlClient.SqlClient
    const found = yield* ArchiveReader.head(databaseId)
    if (Option.isNone(found)) return yield* refuse("this database has no archive in the cluster (it was never written to, or the key is misspelt)")
    const head = found.value
    const oldest = yield* ArchiveReader.oldestSnapshotPosition(databaseId, head.generation)
    if (Option.isNone(oldest)) return yield* refuse("this database's archive holds no snapshot to restore from")
    const reach = `the archive reaches positions ${oldest.value} to ${head.position}`
    let target: number
    if ("position" in options.target) target = options.target.position
    else {
      const instant = new Date(options.target.time)
      if (Number.isNaN(instant.getTime())) return yield* refuse(`"${options.target.time}" is not a time`)
      const at = yield* positionAt(databaseId, head, instant.toISOString())
      if (Option.isNone(at)) {
        return yield* refuse(`no commit the archive can reach was made at or before ${instant.toISOString()} (${reach}); restore to a position instead`)
      }
      target = at.value
    }
    if (target > head.position) return yield* refuse(`position ${target} is past the database's last acknowledged position ${head.position}`)
    if (target < oldest.value) {
      return yield* refuse(`position ${target} is before the oldest kept snapshot (position ${oldest.value}): ${reach}`)
    }

    const temp = join(dirname(filename), `.restore-${randomUUID()}.sqlite`)
    const removeTemp = Effect.sync(() => {
      for (const suffix of ["", "-wal", "-shm", "-journal"]) rmSync(temp + suffix, { force: true })
    })
    return yield* Effect.gen(function* () {
      yield* ArchiveReader.materialize({ databaseId, catalog, into: temp, position: target, head })
      // A new identity: the install id (a new history: a stale file or registry entry never matches it) and
      // the install time, which sync cursors are bound to (a cursor of the old history resnapshots).
      const installId = randomUUID()
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      yield* Effect.scoped(
        Effect.flatMap(SqliteClient.make({ filename: temp, disableWAL: true }), (file) =>
          file.unsafe(`UPDATE ${installTable} SET install_id = ?, installed_at = ?, updated_at = ? WHERE id = 1`, [installId, now, now])
        )
      ).pipe(Effect.provide(Reactivity.layer), Effect.mapError(unavailable))
      const blob = yield* putFile(databaseId, temp).pipe(Effect.mapError(unavailable))
      const generation = head.generation + 1
      const manifest = JSON.stringify({
        version: 1,
        databaseId,
        generation,
        seq: 0,
        position: target,
        installId,
        root: catalog.name,
        catalogToken: catalog.token,
        fingerprint: catalog.fingerprint,
        createdAt: now,
        bytes: blob.size,
        sha256: blob.sha256,
        restoredFrom: { generation: head.generation, position: head.position }
      })
      // One transaction: the head moves to the new history only if nobody moved it since it was read
      // (its generation, epoch and seq), the epoch bumped (an earlier owner's ship is fenced), and the
      // history's base snapshot indexed; followers are notified when it commits.
      const published = yield* sql.withTransaction(
        Effect.gen(function* () {
          const moved = yield* sql`UPDATE ${sql(heads)}
            SET generation = ${generation}, install_id = ${installId}, epoch = epoch + 1, seq = 0, position = ${target}, updated_at = now()
            WHERE db_id = ${databaseId} AND generation = ${head.generation} AND epoch = ${head.epoch} AND seq = ${head.seq}
            RETURNING db_id`
          if (moved.length === 0) return false
          yield* sql`INSERT INTO ${sql(snapshots)} ${sql.insert({
            db_id: databaseId,
            generation,
            seq: 0,
            position: target,
            sha256: blob.sha256,
            bytes: blob.size,
            manifest
          })}`
          yield* sql`SELECT pg_notify(${channel}, ${`${databaseId}:0:${target}`})`
          return true
        })
      ).pipe(Effect.mapError(unavailable))
      if (!published) return yield* refuse("the database was written to while it was being restored; nothing was changed, retry")
      // The built file becomes the local file, with a sidecar saying it is the new history's base: its
      // next activation keeps it. Failing here only costs that activation a download.
      const sidecar = Sidecars.sidecarPath(dirname(filename), databaseId)
      yield* Effect.try(() => {
        rmSync(sidecar, { force: true })
        for (const suffix of ["-wal", "-shm", "-journal"]) rmSync(filename + suffix, { force: true })
        renameSync(temp, filename)
        Sidecars.fsyncDirectory(dirname(filename))
        Sidecars.writeSidecar(sidecar, { version: 1, installId, generation, seq: 0, position: target })
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("restored file not kept locally; the next activation downloads it", cause)))
      return { position: target, generation, installId, previousPosition: head.position, previousGeneration: head.generation } satisfies Restored
    }).pipe(Effect.ensuring(Effect.suspend(() => (existsSync(temp) ? removeTemp : Effect.void))))
  }).pipe(Effect.withSpan("Archive.restore", { attributes: { "cairn.database": options.databaseId } }))

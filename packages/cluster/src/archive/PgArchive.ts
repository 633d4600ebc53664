/**
 * The cluster's archive: each database's commit log shipped, group by group, to the deployment's
 * object store, its order fenced in PostgreSQL. A group is acknowledged only once its segment's bytes
 * are stored and the head moved under the owner's epoch; an activation bumps the epoch (fencing any
 * earlier owner) and rebuilds the local file from the newest snapshot plus the segments after it
 * unless the file is exactly the archive's state. The local data directory is a cache.
 */
import { randomUUID } from "node:crypto"
import { createReadStream, existsSync, mkdirSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { SqlClient, SqlSchema } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Config, Context, Duration, Effect, Layer, Option, Schema, Scope, Stream } from "effect"
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import {
  Archive,
  ArchiveFailed,
  type ArchiveShape,
  type Claim,
  type Group,
  type Installed,
  namespaceOf,
  type Session
} from "@cairn/store/Archive"
import { installIdOf } from "@cairn/store/Install"
import { lastPosition } from "@cairn/store/Log"
import { ObjectStore, ObjectStoreError } from "@cairn/store/ObjectStore"
import * as ArchiveReader from "./ArchiveReader.js"
import { channel, ensure, Head, heads, segments, snapshots } from "./ArchiveTables.js"
import * as Segment from "./Segment.js"
import * as Sidecars from "../internal/sidecar.js"
import { type Sidecar } from "../internal/sidecar.js"

export interface ArchiveSettings {
  /** A snapshot is taken after this many commits since the last one (`CAIRN_ARCHIVE_SNAPSHOT_EVERY`). */
  readonly snapshotEvery: number
  /** Snapshots kept per database; older ones and the segments below the oldest kept go (`CAIRN_ARCHIVE_SNAPSHOTS_KEPT`). */
  readonly snapshotsKept: number
  /** A ship (object store put + PostgreSQL) slower than this is a failure (`CAIRN_ARCHIVE_SHIP_TIMEOUT`). */
  readonly shipTimeout: Duration.Duration
}

export const defaults: ArchiveSettings = { snapshotEvery: 10_000, snapshotsKept: 7, shipTimeout: Duration.seconds(30) }

export const settingsConfig: Config.Config<ArchiveSettings> = Config.all({
  snapshotEvery: positiveInteger("CAIRN_ARCHIVE_SNAPSHOT_EVERY").pipe(Config.withDefault(defaults.snapshotEvery)),
  snapshotsKept: positiveInteger("CAIRN_ARCHIVE_SNAPSHOTS_KEPT").pipe(Config.withDefault(defaults.snapshotsKept)),
  shipTimeout: Config.duration("CAIRN_ARCHIVE_SHIP_TIMEOUT").pipe(Config.withDefault(defaults.shipTimeout))
})

const sidecarPath = (claim: Claim) => Sidecars.sidecarPath(claim.directory, claim.databaseId)

const unavailable = (cause: unknown) => new ArchiveFailed({ reason: "unavailable", cause })
const fenced = () => new ArchiveFailed({ reason: "fenced", cause: new Error("another process claimed the database") })

/** What one activation knows of its database's archive (changed only by its writer's fiber, or before it starts). */
interface State {
  generation: number
  installId: string
  epoch: number
  seq: number
  position: number
  /** Position of the newest snapshot (the next periodic one is due `snapshotEvery` after it). */
  snapshotPosition: number
  snapshotting: boolean
  ready: boolean
  failed: boolean
  vacuumInto: ((path: string) => Effect.Effect<void>) | undefined
}

/** Builds the archive over the context's PostgreSQL client and object store (tables must exist: see `ensure`). */
export const make = (settings: ArchiveSettings): Effect.Effect<ArchiveShape, never, SqlClient.SqlClient | ObjectStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* ObjectStore
    const context = Context.make(SqlClient.SqlClient, sql).pipe(Context.add(ObjectStore, store))

    const claimHead = SqlSchema.findOne({
      Request: Schema.String,
      Result: Head,
      execute: (id) =>
        sql`UPDATE ${sql(heads)} SET epoch = epoch + 1, updated_at = now() WHERE db_id = ${id}
            RETURNING db_id, install_id, generation, epoch, seq, position`
    })

    /** Stores the file at `path` as a blob of the database's archive; answers its digest and size. */
    const putFile = (databaseId: string, path: string) =>
      Effect.suspend(() => {
        const size = statSync(path).size
        const body = NodeStream.fromReadable<ObjectStoreError>(
          () => createReadStream(path, { highWaterMark: 1 << 20 }),
          (cause) => new ObjectStoreError({ cause })
        )
        return store.put(namespaceOf(databaseId), body, size)
      })

    /**
     * A snapshot of the file (`vacuumInto` made it at `path`, at `seq`/`position`) stored and indexed.
     * `create`: the database's first archive state (inserts its head; loses to a concurrent creator);
     * else indexed only while this owner's epoch holds (a fenced owner's snapshot is not recorded).
     */
    const publishSnapshot = (claim: Claim, state: State, path: string, create: boolean) =>
      Effect.gen(function* () {
        const blob = yield* putFile(claim.databaseId, path)
        const createdAt = new Date(yield* Clock.currentTimeMillis).toISOString()
        const manifest = JSON.stringify({
          version: 1,
          databaseId: claim.databaseId,
          generation: state.generation,
          seq: state.seq,
          position: state.position,
          installId: state.installId,
          root: claim.catalog.name,
          catalogToken: claim.catalog.token,
          fingerprint: claim.catalog.fingerprint,
          createdAt,
          bytes: blob.size,
          sha256: blob.sha256
        })
        const row = {
          db_id: claim.databaseId,
          generation: state.generation,
          seq: state.seq,
          position: state.position,
          sha256: blob.sha256,
          bytes: blob.size,
          manifest
        }
        const upsert = sql`INSERT INTO ${sql(snapshots)} ${sql.insert(row)}
          ON CONFLICT (db_id, generation, seq) DO UPDATE SET position = excluded.position, sha256 = excluded.sha256, bytes = excluded.bytes, manifest = excluded.manifest, created_at = now()`
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            if (create) {
              const inserted = yield* sql`INSERT INTO ${sql(heads)} ${sql.insert({
                db_id: claim.databaseId,
                install_id: state.installId,
                generation: state.generation,
                epoch: state.epoch,
                seq: state.seq,
                position: state.position
              })} ON CONFLICT (db_id) DO NOTHING RETURNING db_id`
              if (inserted.length === 0) return false
            } else {
              const mine = yield* sql`SELECT 1 FROM ${sql(heads)} WHERE db_id = ${claim.databaseId} AND epoch = ${state.epoch} FOR SHARE`
              if (mine.length === 0) return false
            }
            yield* upsert
            return true
          })
        )
      })

    /** Snapshots beyond the newest `snapshotsKept` go, with the segments at or below the oldest kept one; then their blobs. */
    const retain = (databaseId: string, generation: number) =>
      Effect.gen(function* () {
        const removed = yield* sql.withTransaction(
          Effect.gen(function* () {
            const kept = yield* sql<{ readonly seq: string | number }>`SELECT seq FROM ${sql(snapshots)}
              WHERE db_id = ${databaseId} AND generation = ${generation} ORDER BY seq DESC LIMIT ${settings.snapshotsKept}`
            if (kept.length < settings.snapshotsKept) return []
            const oldest = Number(kept[kept.length - 1]!.seq)
            const a = yield* sql<{ readonly sha256: string }>`DELETE FROM ${sql(snapshots)}
              WHERE db_id = ${databaseId} AND generation = ${generation} AND seq < ${oldest} RETURNING sha256`
            const b = yield* sql<{ readonly sha256: string }>`DELETE FROM ${sql(segments)}
              WHERE db_id = ${databaseId} AND generation = ${generation} AND seq <= ${oldest} RETURNING sha256`
            const candidates = [...new Set([...a, ...b].map((r) => r.sha256))]
            if (candidates.length === 0) return []
            const still = yield* sql<{ readonly sha256: string }>`SELECT sha256 FROM ${sql(snapshots)} WHERE db_id = ${databaseId} AND sha256 IN ${sql.in(candidates)}
              UNION SELECT sha256 FROM ${sql(segments)} WHERE db_id = ${databaseId} AND sha256 IN ${sql.in(candidates)}`
            const referenced = new Set(still.map((r) => r.sha256))
            return candidates.filter((c) => !referenced.has(c))
          })
        )
        // After the index forgot them: a crash here leaves unreferenced blobs, never a referenced blob missing.
        for (const sha256 of removed) yield* store.remove(namespaceOf(databaseId), sha256)
        return removed.length
      })

    /** Reads the sidecar, if any (see `dropSidecar`). */
    const readSidecar = (claim: Claim): Effect.Effect<Option.Option<Sidecar>> => Sidecars.readSidecar(sidecarPath(claim))

    /** Removes the sidecar once the database is claimed, before its file is touched: from now on a crash leaves the file untrusted. */
    const dropSidecar = (claim: Claim): Effect.Effect<void> => Sidecars.dropSidecar(sidecarPath(claim))

    /** Applies the segments after the sidecar's seq to the local file (closed again before the store opens it). */
    const catchUp = (claim: Claim, head: Head, sidecar: Sidecar) =>
      Effect.scoped(
        Effect.gen(function* () {
          const rows = yield* ArchiveReader.segmentsAfter(claim.databaseId, head.generation, sidecar.seq, { throughSeq: head.seq })
          if (rows.length !== head.seq - sidecar.seq || rows[0]?.seq !== sidecar.seq + 1) return false
          const contents = yield* ArchiveReader.readSegments(rows)
          const file = yield* SqliteClient.make({ filename: claim.filename }).pipe(Effect.mapError(unavailable))
          const position = yield* lastPosition(file).pipe(Effect.mapError(unavailable))
          const installId = yield* installIdOf(file).pipe(Effect.mapError(unavailable))
          if (position !== sidecar.position || Option.getOrUndefined(installId) !== head.install_id) return false
          yield* ArchiveReader.installCatalog(file, claim.catalog, claim.databaseId)
          const reached = yield* file.withTransaction(Segment.apply(file, claim.catalog, contents, position)).pipe(
            Effect.catchTag("SqlError", (e) => Effect.fail(unavailable(e)))
          )
          return reached === head.position
        })
      ).pipe(
        Effect.provide(Reactivity.layer),
        // A file the segments do not continue is rebuilt instead.
        Effect.catchIf((e) => e.reason === "diverged", () => Effect.succeed(false))
      )

    /** Brings the local file to the archive's head: used as is, caught up, or rebuilt; the registry told. */
    const materialize = (claim: Claim, head: Head, sidecar: Option.Option<Sidecar>) =>
      Effect.gen(function* () {
        const { databaseId, registry } = claim
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        const local = existsSync(claim.filename)
        const same = Option.isSome(sidecar) && local && sidecar.value.installId === head.install_id && sidecar.value.generation === head.generation
        let how: "kept" | "caught up" | "rebuilt" = "rebuilt"
        if (same && sidecar.value.seq === head.seq && sidecar.value.position === head.position) how = "kept"
        else if (same && sidecar.value.seq < head.seq && sidecar.value.position <= head.position && (yield* catchUp(claim, head, sidecar.value))) {
          how = "caught up"
        } else {
          yield* ArchiveReader.materialize({ databaseId, catalog: claim.catalog, into: claim.filename, head }).pipe(Effect.provide(context))
        }
        const registered = yield* registry.lookup(databaseId)
        if (how !== "rebuilt" && Option.isSome(registered) && registered.value.install_id === head.install_id) {
          yield* registry.advance(databaseId, head.position)
        } else {
          // Rebuilt (or a registry that never knew this file): its floor is the archive's head, which may be lower.
          yield* registry.restored({
            id: databaseId,
            install_id: head.install_id,
            created_at: Option.match(registered, { onNone: () => now, onSome: (r) => r.created_at }),
            position: head.position
          })
        }
        yield* Effect.logInfo("database materialized from the archive").pipe(
          Effect.annotateLogs({ database: databaseId, how, seq: head.seq, position: head.position })
        )
      })

    /** After a ship: the next periodic snapshot, made now (the writer holds the file) and stored in the background. */
    const maybeSnapshot = (claim: Claim, state: State, scope: Scope.Scope) =>
      Effect.suspend(() => {
        if (state.snapshotting || state.vacuumInto === undefined || state.position - state.snapshotPosition < settings.snapshotEvery) return Effect.void
        const path = join(claim.directory, `.tmp-${randomUUID()}.snapshot`)
        const at = { ...state }
        state.snapshotting = true
        return Effect.zipRight(
          state.vacuumInto(path),
          Effect.forkIn(
            publishSnapshot(claim, at, path, false).pipe(
              Effect.tap((published) =>
                published
                  ? Effect.zipRight(
                      Effect.sync(() => {
                        state.snapshotPosition = Math.max(state.snapshotPosition, at.position)
                      }),
                      retain(claim.databaseId, at.generation)
                    )
                  : Effect.void
              ),
              Effect.catchAllCause((cause) => Effect.logWarning("archive snapshot failed; the next ship tries again", cause)),
              Effect.ensuring(
                Effect.sync(() => {
                  state.snapshotting = false
                  rmSync(path, { force: true })
                })
              ),
              Effect.annotateLogs({ database: claim.databaseId })
            ),
            scope
          )
        )
      })

    const claim = (claim: Claim): Effect.Effect<Option.Option<Session>, ArchiveFailed, Scope.Scope> =>
      Effect.gen(function* () {
        const scope = yield* Effect.scope
        yield* Effect.orDie(Effect.try(() => mkdirSync(claim.directory, { recursive: true })))
        const sidecar = yield* readSidecar(claim)
        const claimed = yield* claimHead(claim.databaseId).pipe(
          Effect.mapError((e) => (e._tag === "ParseError" ? new ArchiveFailed({ reason: "diverged", cause: e }) : unavailable(e)))
        )
        yield* dropSidecar(claim)
        const state: State = {
          generation: 1,
          installId: "",
          epoch: 1,
          seq: 0,
          position: 0,
          snapshotPosition: 0,
          snapshotting: false,
          ready: false,
          failed: false,
          vacuumInto: undefined
        }
        const existing = Option.isSome(claimed)
        if (Option.isSome(claimed)) {
          const head = claimed.value
          yield* materialize(claim, head, sidecar)
          Object.assign(state, { generation: head.generation, installId: head.install_id, epoch: head.epoch, seq: head.seq, position: head.position })
          const snapshot = yield* ArchiveReader.snapshotAtOrBefore(claim.databaseId, head.generation, head.position).pipe(Effect.provide(context))
          state.snapshotPosition = Option.match(snapshot, { onNone: () => 0, onSome: (s) => s.position })
        }

        const ready = (installed: Installed) =>
          Effect.gen(function* () {
            state.vacuumInto = installed.vacuumInto
            if (existing && (installed.installId !== state.installId || installed.position !== state.position)) {
              return yield* new ArchiveFailed({ reason: "diverged", cause: new Error("the opened file is not the archive's state") })
            }
            state.installId = installed.installId
            state.position = installed.position
            // A new database's first state, or one whose install changed the catalog: segments after a snapshot share one install.
            if (!existing || installed.outcome !== "unchanged") {
              const path = join(claim.directory, `.tmp-${randomUUID()}.snapshot`)
              yield* Effect.acquireUseRelease(
                installed.vacuumInto(path),
                () => publishSnapshot(claim, state, path, !existing),
                () => Effect.sync(() => rmSync(path, { force: true }))
              ).pipe(
                Effect.mapError(unavailable),
                Effect.flatMap((published) => (published ? Effect.void : Effect.fail(fenced())))
              )
              state.snapshotPosition = state.position
            }
            state.ready = true
          })

        const ship = (group: Group): Effect.Effect<void, ArchiveFailed> =>
          Effect.gen(function* () {
            if (state.failed || !state.ready) return yield* fenced()
            if (group.from !== state.position) return yield* new ArchiveFailed({ reason: "diverged", cause: new Error("a group does not continue the shipped position") })
            const seq = state.seq + 1
            const bytes = Segment.encode(Segment.fromGroup(claim.databaseId, state.generation, seq, group))
            const blob = yield* store.put(namespaceOf(claim.databaseId), Stream.make(bytes), bytes.byteLength).pipe(Effect.mapError(unavailable))
            // One statement, so one round trip and its own transaction: the head moves under this owner's
            // epoch and expected seq, the segment is indexed, and followers are notified at its commit.
            const moved = yield* sql`WITH moved AS (
                UPDATE ${sql(heads)} SET seq = seq + 1, position = ${group.to}, updated_at = now()
                WHERE db_id = ${claim.databaseId} AND epoch = ${state.epoch} AND seq = ${state.seq} RETURNING seq
              ), added AS (
                INSERT INTO ${sql(segments)} (db_id, generation, seq, first_position, last_position, sha256, bytes)
                SELECT ${claim.databaseId}, ${state.generation}, moved.seq, ${group.from}, ${group.to}, ${blob.sha256}, ${blob.size} FROM moved
                RETURNING seq
              )
              SELECT pg_notify(${channel}, ${`${claim.databaseId}:${seq}:${group.to}`}) FROM added`.pipe(
              Effect.map((rows) => rows.length === 1),
              Effect.mapError(unavailable)
            )
            if (!moved) return yield* fenced()
            state.seq = seq
            state.position = group.to
            yield* maybeSnapshot(claim, state, scope)
          }).pipe(
            // The writer runs its group uninterruptibly: the ship itself may be cut short (its timeout, shutdown).
            Effect.interruptible,
            Effect.timeoutFail({ duration: settings.shipTimeout, onTimeout: () => unavailable(new Error("ship timed out")) }),
            Effect.tapError(() => Effect.sync(() => (state.failed = true))),
            Effect.withSpan("Archive.ship", { attributes: { "cairn.group.commits": group.commits.length } })
          )

        const closed = (position: number) =>
          Effect.suspend(() => {
            if (!state.ready || state.failed || position !== state.position) return Effect.void
            const sidecar: Sidecar = { version: 1, installId: state.installId, generation: state.generation, seq: state.seq, position }
            return Effect.try(() => Sidecars.writeSidecar(sidecarPath(claim), sidecar)).pipe(
              Effect.catchAllCause((cause) => Effect.logWarning("archive sidecar not written; the next activation rebuilds", cause))
            )
          })

        return Option.some<Session>({ ready, ship, closed })
      }).pipe(Effect.provide(context), Effect.withSpan("Archive.claim"))

    return { authoritative: true, claim }
  })

/** The archive over PostgreSQL (`SqlClient`, e.g. `PgClient.layer`) and the deployment's object store, with the given settings. */
export const layerWith = (settings: ArchiveSettings) =>
  Layer.effect(Archive, Effect.zipRight(ensure, make(settings)))

/** The archive with its settings from `CAIRN_ARCHIVE_*`. */
export const layer = Layer.effect(
  Archive,
  Effect.gen(function* () {
    const settings = yield* settingsConfig
    yield* ensure
    return yield* make(settings)
  })
)

// Online per-tenant operations on one store (one "runner") over a real PostgreSQL and a shared object
// store: a point-in-time restore publishes a new history of the archive while the store keeps running,
// refused targets change nothing, a time maps to the last commit at or before it, and a storage fault
// of the local file is cleared by rebuilding from the archive instead of refusing until restart.
import { existsSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { startPostgres, postgresUnavailable, type Postgres } from "@cairn/testkit/Postgres"
import { Databases, databaseId } from "@cairn/store/Databases"
import { ObjectStore, type ObjectStoreShape } from "@cairn/store/ObjectStore"
import * as Position from "@cairn/store/Position"
import * as ArchiveRestore from "@cairn/cluster/archive/ArchiveRestore"
import type * as PgArchive from "@cairn/cluster/archive/PgArchive"
import { archiveRows, catalog, filesystemStore, KEY, mutate, pgLayer, request, rows, storeLayer, tempDir, archiveWorld } from "./support/archive.js"

const unavailable = postgresUnavailable()
let pg: Postgres
let n = 0
const freshDatabase = () => pg.createDatabase(`online_${++n}`)
const id = databaseId(DatabaseKey.make(KEY))
const fileOf = (dataDir: string) => join(dataDir, "databases", `${id}.sqlite`)

const withStore = <A, E>(
  options: { dataDir: string; objects: ObjectStoreShape; url: string; settings?: Partial<PgArchive.ArchiveSettings> },
  f: (store: Context.Context<Databases>) => Effect.Effect<A, E>
) =>
  Effect.scoped(
    Effect.flatMap(Layer.build(storeLayer({ dataDir: options.dataDir, objects: options.objects, pgUrl: options.url, settings: options.settings ?? {} })), f)
  )

/** The install record a sync cursor is bound to. */
const identity = (filename: string) =>
  Effect.scoped(
    Effect.flatMap(SqliteClient.make({ filename, readonly: true }), (sql) =>
      Effect.map(sql.unsafe<{ readonly install_id: string; readonly installed_at: string }>(`SELECT install_id, installed_at FROM _cairn_install`), (r) => r[0]!)
    )
  ).pipe(Effect.provide(Reactivity.layer), Effect.orDie)

const counters = (store: Context.Context<Databases>) => rows(store, `SELECT * FROM "Counter" ORDER BY id`)

/** Creates a counter and bumps it `bumps` times; answers the rows after each position. */
const workload = (store: Context.Context<Databases>, bumps: number) =>
  Effect.gen(function* () {
    const states = new Map<number, ReadonlyArray<Record<string, unknown>>>()
    const created = yield* mutate(store, request("create", { name: "c" }))
    const target = (created.output as { readonly id: string }).id
    states.set(Position.decode(created.position)!, yield* counters(store))
    for (let i = 0; i < bumps; i++) {
      const r = yield* mutate(store, request("bump", { by: i + 1 }, target))
      states.set(Position.decode(r.position)!, yield* counters(store))
    }
    return { target, states }
  })

const restoreIn = (archive: Context.Context<any>, dataDir: string, target: ArchiveRestore.Target) =>
  Effect.flatMap(catalog, (c) => ArchiveRestore.restore({ databaseId: id, catalog: c, filename: fileOf(dataDir), target })).pipe(Effect.provide(archive))

describe.skipIf(unavailable !== undefined)("online restore and fault clearing (one store, real PostgreSQL)", () => {
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(() => pg?.stop())

  it.scopedLive("a restore to P while the store runs: a new history based at P, kept locally, new identity, writes continue at P+1; another process rebuilds the same", () =>
    Effect.gen(function* () {
      const { url, objects, dataDir: mine, pgc, archive } = yield* archiveWorld(freshDatabase())
      const after = yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.gen(function* () {
          const { states, target } = yield* workload(store, 9)
          const before = yield* identity(fileOf(mine))
          // As the entity does: the database closes here (its writer drained, every commit shipped), then the restore.
          assert.isTrue(yield* Context.get(store, Databases).release(id))
          const restored = yield* restoreIn(archive, mine, { position: 4 })
          assert.deepStrictEqual(restored, { position: 4, generation: 2, installId: restored.installId, previousPosition: 10, previousGeneration: 1 })
          const a = yield* archiveRows(id).pipe(Effect.provide(pgc))
          assert.deepStrictEqual({ seq: a.head!.seq, position: a.head!.position }, { seq: 0, position: 4 })
          const inode = statSync(fileOf(mine)).ino
          // Reopened by the next call: the restored file is kept (no download), at P's state, with a new identity.
          assert.deepStrictEqual(yield* counters(store), states.get(4))
          assert.strictEqual(statSync(fileOf(mine)).ino, inode)
          const now = yield* identity(fileOf(mine))
          assert.strictEqual(now.install_id, restored.installId)
          assert.notStrictEqual(now.install_id, before.install_id)
          assert.notStrictEqual(now.installed_at, before.installed_at, "sync cursors of the old history no longer bind")
          // Writes continue from P in the new history.
          const next = yield* mutate(store, request("bump", { by: 100 }, target))
          assert.strictEqual(Position.decode(next.position), 5)
          return yield* counters(store)
        })
      )
      // Another process (a fresh directory) rebuilds the new history from the archive alone.
      const elsewhere = yield* withStore({ dataDir: yield* tempDir(), objects, url }, counters)
      assert.deepStrictEqual(elsewhere, after)
      assert.strictEqual((after[0] as { readonly count: number }).count, 1 + 2 + 3 + 100)
    }))

  it.scopedLive("refused targets change nothing: before the oldest kept snapshot, past the head, no archive, a time before every commit", () =>
    Effect.gen(function* () {
      const { url, objects, dataDir: mine, pgc, archive } = yield* archiveWorld(freshDatabase())
      const settings = { snapshotEvery: 4, snapshotsKept: 2 }
      yield* withStore({ dataDir: mine, objects, url, settings }, (store) =>
        Effect.gen(function* () {
          yield* workload(store, 20)
          // Retention runs in the background after each periodic snapshot.
          for (let i = 0; i < 100; i++) {
            const a = yield* archiveRows(id).pipe(Effect.provide(pgc))
            if (a.snapshots.length === 2 && a.snapshots[0]!.position > 0) break
            yield* Effect.sleep("50 millis")
          }
          yield* Context.get(store, Databases).release(id)
        })
      )
      const before = yield* archiveRows(id).pipe(Effect.provide(pgc))
      const oldest = before.snapshots[0]!.position
      assert.isAbove(oldest, 0)
      const refusal = (exit: Exit.Exit<unknown, unknown>) => {
        assert.isTrue(Exit.isFailure(exit))
        return (Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined) as { readonly _tag: string; readonly message: string }
      }
      const tooOld = refusal(yield* Effect.exit(restoreIn(archive, mine, { position: oldest - 1 })))
      assert.strictEqual(tooOld._tag, "RestoreRefused")
      assert.include(tooOld.message, `before the oldest kept snapshot (position ${oldest})`)
      assert.include(tooOld.message, `reaches positions ${oldest} to 21`)
      const ahead = refusal(yield* Effect.exit(restoreIn(archive, mine, { position: 22 })))
      assert.include(ahead.message, "past the database's last acknowledged position 21")
      const early = refusal(yield* Effect.exit(restoreIn(archive, mine, { time: "2001-01-01T00:00:00Z" })))
      assert.include(early.message, "no commit the archive can reach was made at or before 2001-01-01T00:00:00.000Z")
      const unknown = refusal(
        yield* Effect.exit(
          Effect.flatMap(catalog, (c) => ArchiveRestore.restore({ databaseId: databaseId(DatabaseKey.make("org-nobody")), catalog: c, filename: join(mine, "x.sqlite"), target: { position: 1 } })).pipe(
            Effect.provide(archive)
          )
        )
      )
      assert.include(unknown.message, "this database has no archive in the cluster")
      // Nothing changed: the head, its epoch and the index are as they were; the local file is untouched.
      assert.deepStrictEqual(yield* archiveRows(id).pipe(Effect.provide(pgc)), before)
      assert.isFalse(existsSync(join(mine, "x.sqlite")))
    }))

  it.scopedLive("a time maps to the last position committed at or before it", () =>
    Effect.gen(function* () {
      const { url, objects, dataDir: mine, pgc, archive } = yield* archiveWorld(freshDatabase())
      const at = yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.gen(function* () {
          const created = yield* mutate(store, request("create", { name: "c" }))
          const target = (created.output as { readonly id: string }).id
          yield* mutate(store, request("bump", { by: 1 }, target))
          yield* Effect.sleep("30 millis")
          const at = new Date().toISOString()
          yield* Effect.sleep("30 millis")
          for (let i = 0; i < 5; i++) yield* mutate(store, request("bump", { by: 10 }, target))
          yield* Context.get(store, Databases).release(id)
          return at
        })
      )
      const restored = yield* restoreIn(archive, mine, { time: at })
      assert.strictEqual(restored.position, 2)
      const back = yield* withStore({ dataDir: mine, objects, url }, counters)
      assert.strictEqual((back[0] as { readonly count: number }).count, 1)
    }))

  it.scopedLive("a storage fault of the local file (removed under the writer, or damaged while closed) is cleared by a rebuild from the archive, not kept until restart", () =>
    Effect.gen(function* () {
      const url = freshDatabase()
      const objects = filesystemStore(yield* tempDir())
      const mine = yield* tempDir()
      yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.gen(function* () {
          const { target } = yield* workload(store, 3)
          // Removed under the open writer: the next group is refused (a fault), the database closes.
          rmSync(fileOf(mine))
          const faulted = yield* Effect.exit(mutate(store, request("bump", { by: 1000 }, target)))
          assert.isTrue(Exit.isFailure(faulted))
          // The next call rebuilds it from the archive: every acknowledged commit is there, and it takes writes.
          let answer: Exit.Exit<unknown, unknown> = faulted
          for (let i = 0; i < 50 && Exit.isFailure(answer); i++) {
            yield* Effect.sleep("20 millis")
            answer = yield* Effect.exit(mutate(store, request("bump", { by: 7 }, target)))
          }
          assert.isTrue(Exit.isSuccess(answer), "the faulted database serves again without a restart")
          assert.strictEqual((yield* counters(store))[0]!.count, 1 + 2 + 3 + 7)
        })
      )
      // Damaged while closed (its sidecar says it is the archive's state): the activation finds the fault, the next one rebuilds.
      assert.isTrue(existsSync(join(mine, "databases", `${id}.archive.json`)))
      writeFileSync(fileOf(mine), Buffer.alloc(8192, 7))
      yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.gen(function* () {
          const first = yield* Effect.exit(counters(store))
          const rowsNow = Exit.isSuccess(first) ? first.value : yield* counters(store)
          assert.strictEqual(rowsNow[0]!.count, 13)
        })
      )
    }))
})

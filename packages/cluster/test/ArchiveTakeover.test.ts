import { rmSync, statSync, existsSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { SqlClient } from "@effect/sql"
import { Cause, Context, Effect, Exit, Layer, Option } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { type Receipt } from "@cairn/domain/Receipt"
import { startPostgres, postgresUnavailable, type Postgres } from "@cairn/testkit/Postgres"
import { type Databases, databaseId } from "@cairn/store/Databases"
import { ObjectStore, type ObjectStoreShape } from "@cairn/store/ObjectStore"
import * as Position from "@cairn/store/Position"
import * as ArchiveReader from "@cairn/cluster/archive/ArchiveReader"
import type { MutateRequest } from "@cairn/domain/Mutate"
import { archiveRows, catalog, evolvedCatalog, fileState, filesystemStore, KEY, mutate, pgLayer, request, rows, storeLayer, tempDir, archiveWorld } from "./support/archive.js"
import type * as PgArchive from "@cairn/cluster/archive/PgArchive"

const unavailable = postgresUnavailable()
let pg: Postgres
let n = 0
const freshDatabase = () => pg.createDatabase(`takeover_${++n}`)
const id = databaseId(DatabaseKey.make(KEY))
const fileOf = (dataDir: string) => join(dataDir, "databases", `${id}.sqlite`)

/** An answer as a caller sees it: the receipt, or the public error's tag, message and receipt. */
const answerOf = (exit: Exit.Exit<Receipt, unknown>) =>
  Exit.isSuccess(exit)
    ? { receipt: exit.value }
    : (() => {
        const e = Option.getOrUndefined(Cause.failureOption(exit.cause)) as { readonly _tag: string; readonly message: string; readonly receipt?: Receipt } | undefined
        return { error: e?._tag ?? "defect", message: e?.message, receipt: e?.receipt }
      })()

interface Run {
  readonly requests: ReadonlyArray<MutateRequest>
  readonly answers: ReadonlyArray<ReturnType<typeof answerOf>>
  /** The `Counter` rows right after each position was committed (0: none). */
  readonly states: Map<number, ReadonlyArray<Record<string, unknown>>>
}

/** A sequential mixed workload (creates, bumps, finishes, and finishes rejected because done already). */
const workload = (store: Context.Context<Databases>, count: number) =>
  Effect.gen(function* () {
    const requests: Array<MutateRequest> = []
    const answers: Array<ReturnType<typeof answerOf>> = []
    const states = new Map<number, ReadonlyArray<Record<string, unknown>>>([[0, []]])
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) {
      const req =
        ids.length < 3 || i % 11 === 0
          ? request("create", { name: `c${i}` })
          : i % 5 === 0
            ? request("finish", {}, ids[i % ids.length]!)
            : request("bump", { by: (i % 4) + 1 }, ids[i % ids.length]!)
      const exit = yield* Effect.exit(mutate(store, req))
      requests.push(req)
      answers.push(answerOf(exit))
      if (Exit.isSuccess(exit)) {
        if (req.operation.name === "create") ids.push((exit.value.output as { readonly id: string }).id)
        states.set(Position.decode(exit.value.position)!, yield* rows(store, `SELECT * FROM "Counter" ORDER BY id`))
      }
    }
    return { requests, answers, states } satisfies Run
  })

const withStore = <A, E>(
  options: { dataDir: string; objects: ObjectStoreShape; url: string; settings?: Partial<PgArchive.ArchiveSettings>; evolved?: boolean },
  f: (store: Context.Context<Databases>) => Effect.Effect<A, E>
) =>
  Effect.scoped(
    Effect.flatMap(
      Layer.build(storeLayer({ dataDir: options.dataDir, objects: options.objects, pgUrl: options.url, settings: options.settings ?? {}, evolved: options.evolved ?? false })),
      f
    )
  )

const takeover = (settings: Partial<PgArchive.ArchiveSettings>, count: number) =>
  Effect.gen(function* () {
    const { url, objects, dataDir: firstDir, pgc, archive } = yield* archiveWorld(freshDatabase())

    const run = yield* withStore({ dataDir: firstDir, objects, url, settings }, (store) =>
      Effect.gen(function* () {
        const run = yield* workload(store, count)
        // Periodic snapshots are stored in the background: wait until retention has had its turn.
        if (settings.snapshotsKept !== undefined) {
          for (let i = 0; i < 100; i++) {
            const a = yield* archiveRows(id).pipe(Effect.provide(pgc))
            if (a.snapshots.length === settings.snapshotsKept && a.snapshots[0]!.position > 0) break
            yield* Effect.sleep("50 millis")
          }
        }
        return run
      })
    )
    const original = yield* fileState(fileOf(firstDir))
    const rejected = run.answers.filter((a) => "error" in a && a.error === "OperationRejected").length
    assert.isAbove(rejected, 0, "the workload has rejections")
    // The first machine is gone, data directory and all.
    rmSync(firstDir, { recursive: true, force: true })

    const secondDir = yield* tempDir()
    yield* withStore({ dataDir: secondDir, objects, url, settings }, (store) =>
      Effect.gen(function* () {
        // Every request again, same invocation ids: each answered exactly as the first time (rejections too).
        for (let i = 0; i < run.requests.length; i++) {
          assert.deepStrictEqual(answerOf(yield* Effect.exit(mutate(store, run.requests[i]!))), run.answers[i], `replay of request ${i}`)
        }
        const rebuilt = yield* fileState(fileOf(secondDir))
        assert.deepStrictEqual(rebuilt, original)
      })
    )

    // Point in time: every position since the oldest kept snapshot, built from the archive alone.
    const a = yield* archiveRows(id).pipe(Effect.provide(pgc))
    const oldest = Option.getOrThrow(yield* ArchiveReader.oldestSnapshotPosition(id, 1).pipe(Effect.provide(pgc), Effect.orDie))
    assert.strictEqual(oldest, a.snapshots[0]!.position)
    const scratch = yield* tempDir()
    for (let p = oldest; p <= a.head!.position; p++) {
      const into = join(scratch, `${p}.sqlite`)
      const built = yield* ArchiveReader.materialize({ databaseId: id, catalog: yield* catalog, into, position: p }).pipe(Effect.provide(archive), Effect.orDie)
      assert.strictEqual(built.position, p)
      const state = yield* fileState(into)
      assert.deepStrictEqual(state.counters, run.states.get(p), `rows at position ${p}`)
      assert.deepStrictEqual(state.commits, original.commits.filter((c) => Number(c.position) <= p), `log at position ${p}`)
      assert.deepStrictEqual(state.receipts, original.receipts.filter((r) => Number(r.position) <= p), `receipts at position ${p}`)
    }
    if (oldest > 0) {
      const before = yield* Effect.exit(ArchiveReader.materialize({ databaseId: id, catalog: yield* catalog, into: join(scratch, "x.sqlite"), position: oldest - 1 }).pipe(Effect.provide(archive)))
      assert.isTrue(Exit.isFailure(before), "no restore before the oldest kept snapshot")
    }
    return a
  })

describe.skipIf(unavailable !== undefined)("archive: takeover, point in time", () => {
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(() => pg?.stop())

  it.scopedLive("takeover on a fresh data directory: rows, positions, log and receipts equal the original; replays answer identically; PITR to every position", () =>
    Effect.gen(function* () {
      const a = yield* takeover({}, 40)
      assert.deepStrictEqual(a.snapshots.map((s) => s.position), [0])
    }))

  it.scopedLive("the same with a snapshot every 4 commits and 3 kept: older snapshots and their segments are gone, the rest suffices", () =>
    Effect.gen(function* () {
      const a = yield* takeover({ snapshotEvery: 4, snapshotsKept: 3 }, 60)
      // Retention runs after each periodic snapshot; one stored as the store closed may not have had its turn.
      assert.include([3, 4], a.snapshots.length)
      assert.isAbove(a.snapshots[0]!.position, 0)
      // Segments at or below the oldest kept snapshot are gone; those after it are all there, gap-free.
      assert.strictEqual(a.segments[0]!.seq, a.snapshots[0]!.seq + 1)
      a.segments.forEach((s, i) => i > 0 && assert.strictEqual(s.from, a.segments[i - 1]!.to))
    }))

  it.scopedLive("a clean close leaves the file trusted: reopened as is, caught up when behind, rebuilt after a crash or when its file is gone", () =>
    Effect.gen(function* () {
      const url = freshDatabase()
      const objects = filesystemStore(yield* tempDir())
      const mine = yield* tempDir()
      const theirs = yield* tempDir()
      const inode = () => statSync(fileOf(mine)).ino
      const target = yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.map(mutate(store, request("create", { name: "a" })), (r) => (r.output as { readonly id: string }).id)
      )
      assert.isTrue(existsSync(join(mine, "databases", `${id}.archive.json`)))
      const first = inode()
      // Reopened on the same directory: the file is the archive's state, used as it is.
      yield* withStore({ dataDir: mine, objects, url }, (store) => mutate(store, request("bump", { by: 1 }, target)))
      assert.strictEqual(inode(), first)
      // Another process moves it on; back here, the segments after our seq are applied in place.
      yield* withStore({ dataDir: theirs, objects, url }, (store) =>
        Effect.zipRight(mutate(store, request("bump", { by: 10 }, target)), mutate(store, request("finish", {}, target)))
      )
      const caughtUp = yield* withStore({ dataDir: mine, objects, url }, (store) => rows(store, `SELECT count, done FROM "Counter"`))
      assert.deepStrictEqual(caughtUp, [{ count: 11, done: 1 }])
      assert.strictEqual(inode(), first)
      // A crash leaves no sidecar: the file is not trusted, and rebuilt (a new file) at the same state.
      rmSync(join(mine, "databases", `${id}.archive.json`))
      const rebuilt = yield* withStore({ dataDir: mine, objects, url }, (store) => rows(store, `SELECT count, done FROM "Counter"`))
      assert.deepStrictEqual(rebuilt, [{ count: 11, done: 1 }])
      assert.notStrictEqual(inode(), first)
      // Its file gone while the registry still knows it: not a storage fault here, rebuilt from the archive.
      rmSync(fileOf(mine))
      rmSync(join(mine, "databases", `${id}.archive.json`), { force: true })
      const again = yield* withStore({ dataDir: mine, objects, url }, (store) => rows(store, `SELECT count, done FROM "Counter"`))
      assert.deepStrictEqual(again, [{ count: 11, done: 1 }])
    }))

  it.scopedLive("an activation whose install changed the catalog snapshots the file: later segments share its install; takeover and PITR still hold", () =>
    Effect.gen(function* () {
      const { url, objects, dataDir: mine, pgc, archive } = yield* archiveWorld(freshDatabase())
      const target = yield* withStore({ dataDir: mine, objects, url }, (store) =>
        Effect.flatMap(mutate(store, request("create", { name: "a" })), (r) =>
          Effect.as(mutate(store, request("bump", { by: 2 }, (r.output as { readonly id: string }).id)), (r.output as { readonly id: string }).id)
        )
      )
      // The same directory, a newer catalog: the kept file is updated by its install, then snapshotted at the head.
      yield* withStore({ dataDir: mine, objects, url, evolved: true }, (store) =>
        Effect.zipRight(mutate(store, request("create", { name: "b", note: "new field" })), mutate(store, request("bump", { by: 3 }, target)))
      )
      const a = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(a.snapshots.map((s) => [s.seq, s.position]), [[0, 0], [2, 2]])
      const manifests = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly manifest: string }>`SELECT manifest FROM cairn_archive_snapshots WHERE db_id = ${id} ORDER BY seq`).pipe(
        Effect.provide(pgc),
        Effect.orDie
      )
      const tokens = manifests.map((m) => JSON.parse(m.manifest).catalogToken)
      assert.deepStrictEqual(tokens, [(yield* catalog).token, (yield* evolvedCatalog).token])
      // Taken over with the newer catalog on a fresh directory: everything is there, the new field too.
      const rebuilt = yield* withStore({ dataDir: yield* tempDir(), objects, url, evolved: true }, (store) =>
        rows(store, `SELECT name, count, note FROM "Counter" ORDER BY name`)
      )
      assert.deepStrictEqual(rebuilt, [{ name: "a", count: 5, note: null }, { name: "b", count: 0, note: "new field" }])
      // A point before the change: the old snapshot, read with the newer catalog.
      const into = join(yield* tempDir(), "p1.sqlite")
      yield* ArchiveReader.materialize({ databaseId: id, catalog: yield* evolvedCatalog, into, position: 1 }).pipe(Effect.provide(archive), Effect.orDie)
      assert.deepStrictEqual((yield* fileState(into)).counters.map((c) => [c.name, c.count]), [["a", 0]])
    }))
})

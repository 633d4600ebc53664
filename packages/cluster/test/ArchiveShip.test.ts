import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Option } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { startPostgres, postgresUnavailable, type Postgres } from "@cairn/testkit/Postgres"
import { namespaceOf } from "@cairn/store/Archive"
import { databaseId } from "@cairn/store/Databases"
import * as Position from "@cairn/store/Position"
import * as ArchiveReader from "@cairn/cluster/archive/ArchiveReader"
import { ObjectStore } from "@cairn/store/ObjectStore"
import {
  archiveRows,
  filesystemStore,
  KEY,
  mutate,
  pgLayer,
  request,
  rows,
  storeLayer,
  switchboard,
  tempDir,
  wrapStore
} from "./support/archive.js"

const unavailable = postgresUnavailable()
let pg: Postgres
let n = 0
const freshDatabase = () => pg.createDatabase(`ship_${++n}`)
const id = databaseId(DatabaseKey.make(KEY))
const positionOf = (receipt: { readonly position: string }) => Position.decode(receipt.position)!

/** The typed failure of an exit, if it failed with one. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

describe.skipIf(unavailable !== undefined)("archive: ship, refusal, fence", () => {
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(() => pg?.stop())

  it.scopedLive("a mutation is acknowledged only once its segment is stored and the head moved", () =>
    Effect.gen(function* () {
      const url = freshDatabase()
      const objectDir = yield* tempDir()
      const switches = switchboard()
      const objects = wrapStore(filesystemStore(objectDir), switches)
      const store = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      const pgc = yield* Layer.build(pgLayer(url))

      const created = yield* mutate(store, request("create", { name: "a" }))
      assert.strictEqual(positionOf(created), 1)
      const archive = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(archive.head && { seq: archive.head.seq, position: archive.head.position }, { seq: 1, position: 1 })
      assert.deepStrictEqual(archive.segments.map((s) => [s.seq, s.from, s.to]), [[1, 0, 1]])
      assert.deepStrictEqual(archive.snapshots.map((s) => [s.seq, s.position]), [[0, 0]])
      // The segment's bytes are in the object store and hold the commit and its receipt.
      const stat = yield* Effect.orDie(objects.stat(namespaceOf(id), archive.segments[0]!.sha256))
      assert.isTrue(Option.isSome(stat))
      const segment = yield* ArchiveReader.readSegment({ db_id: id, generation: 1, seq: 1, first_position: 0, last_position: 1, sha256: archive.segments[0]!.sha256, bytes: 0 }).pipe(
        Effect.provideService(ObjectStore, objects),
        Effect.orDie
      )
      assert.deepStrictEqual(segment.commits.map((c) => c.invocation_id), [created.invocationId])
      assert.deepStrictEqual(segment.receipts.map((r) => [r.invocation_id, r.outcome]), [[created.invocationId, "committed"]])

      // Hold the next put: committed locally, but its caller is not answered and the head does not move.
      const hold = yield* Deferred.make<void>()
      switches.hold = hold
      const target = (created.output as { readonly id: string }).id
      const bump = yield* Effect.fork(mutate(store, request("bump", { by: 2 }, target)))
      yield* Effect.sleep("300 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(bump)), "answered before its segment was stored")
      assert.strictEqual((yield* rows(store, "SELECT max(position) AS p FROM _cairn_commits"))[0]!.p, 2)
      assert.strictEqual((yield* archiveRows(id).pipe(Effect.provide(pgc))).head!.position, 1)
      switches.hold = undefined
      yield* Deferred.succeed(hold, undefined)
      const bumped = yield* Fiber.join(bump)
      assert.strictEqual(positionOf(bumped), 2)
      const after = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(after.head && [after.head.seq, after.head.position], [2, 2])
      assert.deepStrictEqual(after.segments.map((s) => [s.seq, s.from, s.to]), [[1, 0, 1], [2, 1, 2]])
    }))

  it.scopedLive("a failed put refuses the group (retryable, nothing acknowledged); the next activation rebuilds without it; the retry commits once", () =>
    Effect.gen(function* () {
      const url = freshDatabase()
      const switches = switchboard()
      const objects = wrapStore(filesystemStore(yield* tempDir()), switches)
      const store = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      const pgc = yield* Layer.build(pgLayer(url))

      const created = yield* mutate(store, request("create", { name: "a" }))
      const target = (created.output as { readonly id: string }).id
      switches.failPuts = true
      const lost = request("bump", { by: 5 }, target)
      const refused = yield* Effect.exit(mutate(store, lost))
      assert.isTrue(Exit.isFailure(refused))
      const error = failureOf(refused)
      assert.strictEqual((error as { readonly _tag?: string } | undefined)?._tag, "Overloaded")
      assert.include(String((error as { readonly message?: string }).message), "nothing was acknowledged")
      // Nothing of it reached the archive.
      const archived = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(archived.head && [archived.head.seq, archived.head.position], [1, 1])

      switches.failPuts = false
      // The database was closed; this activation rebuilds it from the archive: the lost bump is gone,
      // so another invocation takes position 2, and the retry of the lost one is decided fresh at 3.
      const other = yield* mutate(store, request("bump", { by: 1 }, target))
      assert.strictEqual(positionOf(other), 2)
      assert.deepStrictEqual((yield* rows(store, `SELECT count FROM "Counter"`)).map((r) => r.count), [1])
      const retried = yield* mutate(store, lost)
      assert.strictEqual(positionOf(retried), 3)
      assert.deepStrictEqual(retried.output, { count: 6 })
      // And once: its replay answers the same receipt, and the log holds it once.
      const replayed = yield* mutate(store, lost)
      assert.deepStrictEqual(replayed, retried)
      const log = yield* rows(store, `SELECT invocation_id FROM _cairn_commits ORDER BY position`)
      assert.deepStrictEqual(log.map((r) => r.invocation_id), [created.invocationId, other.invocationId, retried.invocationId])
      const final = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(final.segments.map((s) => [s.seq, s.from, s.to]), [[1, 0, 1], [2, 1, 2], [3, 2, 3]])
    }))

  it.scopedLive("a second owner's claim fences the first: its next group is refused, never acknowledged; the log stays one gap-free order", () =>
    Effect.gen(function* () {
      const url = freshDatabase()
      const objects = filesystemStore(yield* tempDir())
      const first = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      const second = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      const pgc = yield* Layer.build(pgLayer(url))

      const created = yield* mutate(first, request("create", { name: "a" }))
      const target = (created.output as { readonly id: string }).id
      yield* mutate(first, request("bump", { by: 1 }, target))
      // The second process activates the same database: it claims it (epoch + 1) and rebuilds from the archive.
      const b = yield* mutate(second, request("bump", { by: 10 }, target))
      assert.strictEqual(positionOf(b), 3)
      assert.deepStrictEqual(b.output, { count: 11 })
      // The first still has it open: its next group commits locally, is fenced, and is refused.
      const zombie = request("bump", { by: 100 }, target)
      const refused = yield* Effect.exit(mutate(first, zombie))
      assert.strictEqual((failureOf(refused) as { readonly _tag?: string } | undefined)?._tag, "Overloaded")
      const archived = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(archived.head && [archived.head.epoch, archived.head.seq, archived.head.position], [2, 3, 3])
      // The owner goes on; the refused invocation retried there commits once, after the others.
      const retried = yield* mutate(second, zombie)
      assert.strictEqual(positionOf(retried), 4)
      assert.deepStrictEqual(retried.output, { count: 111 })
      const final = yield* archiveRows(id).pipe(Effect.provide(pgc))
      assert.deepStrictEqual(final.segments.map((s) => [s.seq, s.from, s.to]), [[1, 0, 1], [2, 1, 2], [3, 2, 3], [4, 3, 4]])
      // The archive's own log: each commit once, in one order.
      const contents = yield* ArchiveReader.readSegments(
        final.segments.map((s) => ({ db_id: id, generation: 1, seq: s.seq, first_position: s.from, last_position: s.to, sha256: s.sha256, bytes: 0 }))
      ).pipe(Effect.provideService(ObjectStore, objects), Effect.orDie)
      const commits = contents.flatMap((s) => s.commits)
      assert.deepStrictEqual(commits.map((c) => c.position), [1, 2, 3, 4])
      assert.strictEqual(new Set(commits.map((c) => c.invocation_id)).size, 4)
      assert.strictEqual(commits[3]!.invocation_id, zombie.invocationId)
    }))
})

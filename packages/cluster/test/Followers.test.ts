import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { ConfigProvider, Effect, Fiber, Layer, Option, Stream } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { startPostgres, postgresUnavailable, type Postgres } from "@cairn/testkit/Postgres"
import { databaseId } from "@cairn/store/Databases"
import * as Position from "@cairn/store/Position"
import { ObjectStore } from "@cairn/store/ObjectStore"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { Followers } from "@cairn/cluster/replica/Followers"
import { catalog, filesystemStore, KEY, mutate, pgLayer, request, rows, storeLayer, tempDir } from "./support/archive.js"

const unavailable = postgresUnavailable()
let pg: Postgres
let n = 0
const id = databaseId(DatabaseKey.make(KEY))
const positionOf = (receipt: { readonly position: string }) => Position.decode(receipt.position)!

/** A reading process: followed copies in its own data directory, over the same PostgreSQL and object store. */
const followersLayer = (dataDir: string, objects: ReturnType<typeof filesystemStore>, url: string, env: Record<string, string> = {}) =>
  Followers.Default.pipe(
    Layer.provide(Layer.succeed(ObjectStore, objects)),
    Layer.provide(pgLayer(url)),
    Layer.provide(StoreConfig.layer({ dataDir })),
    // A reader runs no handlers: the catalog alone, with none (the copy is never written by operations).
    Layer.provide(Layer.effect(OperationCatalog, Effect.map(catalog, (c) => ({ catalog: c, handler: () => { throw new Error("a copy runs no handler") } })))),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ CAIRN_READ_WAIT: "300 millis", ...env })))))
  )

const countersOf = (database: { readonly reader: { readonly unsafe: (text: string) => Effect.Effect<ReadonlyArray<Record<string, unknown>>, unknown> } }) =>
  Effect.orDie(database.reader.unsafe(`SELECT id, name, count, done FROM "Counter" ORDER BY id`))

describe.skipIf(unavailable !== undefined)("followed copies", () => {
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(() => pg?.stop())

  it.scopedLive("a copy answers as the writer at the same position, follows new groups live, and waits for atLeast", () =>
    Effect.gen(function* () {
      const url = pg.createDatabase(`followers_${++n}`)
      const objects = filesystemStore(yield* tempDir())
      const writer = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      const created = yield* mutate(writer, request("create", { name: "a" }))
      const target = (created.output as { readonly id: string }).id
      for (let i = 1; i <= 4; i++) yield* mutate(writer, request("bump", { by: i }, target))
      yield* mutate(writer, request("create", { name: "b" }))

      // No polling to speak of: what the copy learns, it learns from the writer's notifications.
      const reading = yield* Layer.build(followersLayer(yield* tempDir(), objects, url, { CAIRN_FOLLOW_POLL_INTERVAL: "1 hours" }))
      const followers = reading.unsafeMap.get(Followers.key) as Followers
      const copy = yield* followers.read(id, 0)
      assert.isTrue(Option.isSome(copy))
      const database = Option.getOrThrow(copy)
      assert.strictEqual(yield* database.position, 6)
      const expected = yield* rows(writer, `SELECT id, name, count, done FROM "Counter" ORDER BY id`)
      assert.deepStrictEqual(yield* countersOf(database), expected)

      // A live follower of the copy sees a commit made by the writer (another process), through the notification.
      const seen = yield* database.committed.changes.pipe(Stream.takeUntil((p) => p >= 7), Stream.runCollect, Effect.fork)
      const bumped = yield* mutate(writer, request("bump", { by: 10 }, target))
      assert.strictEqual(positionOf(bumped), 7)
      const positions = [...(yield* Fiber.join(seen).pipe(Effect.timeout("10 seconds")))]
      assert.strictEqual(positions[positions.length - 1], 7)
      assert.deepStrictEqual(yield* countersOf(database), yield* rows(writer, `SELECT id, name, count, done FROM "Counter" ORDER BY id`))

      // Read your writes: a read at least at the receipt's position is never older than it.
      const next = yield* mutate(writer, request("bump", { by: 1 }, target))
      const atLeast = yield* followers.read(id, positionOf(next))
      assert.isTrue(Option.isSome(atLeast))
      assert.isAtLeast(yield* Option.getOrThrow(atLeast).position, positionOf(next))
      const counted = (yield* countersOf(Option.getOrThrow(atLeast))).find((r) => r.id === target)
      assert.strictEqual(counted?.count, 1 + 2 + 3 + 4 + 10 + 1)

      // A position no process has reached: the copy waits CAIRN_READ_WAIT, then says it has none (the writer answers).
      const ahead = yield* followers.read(id, positionOf(next) + 1000)
      assert.isTrue(Option.isNone(ahead))
    })
  )

  it.scopedLive("a database with no archive yet has no copy (its writer answers, and creates it); once created, it has one", () =>
    Effect.gen(function* () {
      const url = pg.createDatabase(`followers_${++n}`)
      const objects = filesystemStore(yield* tempDir())
      // The archive's tables exist (a writer ran), but not this database.
      const writer = yield* Layer.build(storeLayer({ dataDir: yield* tempDir(), objects, pgUrl: url }))
      yield* mutate(writer, request("create", { name: "a" }), "org-other")
      const reading = yield* Layer.build(followersLayer(yield* tempDir(), objects, url))
      const followers = reading.unsafeMap.get(Followers.key) as Followers
      assert.isTrue(Option.isNone(yield* followers.read(id, 0)))
      // Created since: the failed build was not kept, the next read has its copy.
      yield* mutate(writer, request("create", { name: "b" }))
      const copy = yield* followers.read(id, 1)
      assert.isTrue(Option.isSome(copy))
      assert.strictEqual(yield* Option.getOrThrow(copy).position, 1)
    })
  )
})

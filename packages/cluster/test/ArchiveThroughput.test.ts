/**
 * The cost of acknowledging after shipping: mutations per second through the same store with the
 * archive (filesystem object store + PostgreSQL) and with `Archive.local`, in the same run. Prints
 * `cluster-ack: ratio_shipped_vs_local=<r>`; asserts only that every mutation was acknowledged once.
 */
import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { Context, Effect, Layer } from "effect"
import { startPostgres, postgresUnavailable, type Postgres } from "@cairn/testkit/Postgres"
import type { Databases } from "@cairn/store/Databases"
import { filesystemStore, localStoreLayer, mutate, request, rows, storeLayer, tempDir } from "./support/archive.js"

const unavailable = postgresUnavailable()
let pg: Postgres

const TOTAL = 3000
const CONCURRENCY = 64
const DATABASES = 4

const measure = (store: Context.Context<Databases>) =>
  Effect.gen(function* () {
    const keys = Array.from({ length: DATABASES }, (_, i) => `org-${i}`)
    const targets = yield* Effect.forEach(keys, (key) => Effect.map(mutate(store, request("create", { name: key }), key), (r) => (r.output as { readonly id: string }).id))
    const started = performance.now()
    yield* Effect.forEach(
      Array.from({ length: TOTAL }, (_, i) => i),
      (i) => mutate(store, request("bump", { by: 1 }, targets[i % DATABASES]!), keys[i % DATABASES]!),
      { concurrency: CONCURRENCY, discard: true }
    )
    const seconds = (performance.now() - started) / 1000
    const counts = yield* Effect.forEach(keys, (key) => Effect.map(rows(store, `SELECT count FROM "Counter"`, key), (r) => Number(r[0]!.count)))
    assert.strictEqual(counts.reduce((a, b) => a + b, 0), TOTAL)
    return TOTAL / seconds
  })

describe.skipIf(unavailable !== undefined)("archive: throughput", () => {
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(() => pg?.stop())

  it.scopedLive("mutations per second, shipped vs local", () =>
    Effect.gen(function* () {
      const local = yield* Effect.scoped(Effect.flatMap(Layer.build(localStoreLayer(yield* tempDir())), measure))
      const url = pg.createDatabase("throughput")
      const shipped = yield* Effect.scoped(
        Effect.flatMap(Layer.build(storeLayer({ dataDir: yield* tempDir(), objects: filesystemStore(yield* tempDir()), pgUrl: url })), measure)
      )
      const localAgain = yield* Effect.scoped(Effect.flatMap(Layer.build(localStoreLayer(yield* tempDir())), measure))
      const base = (local + localAgain) / 2
      console.log(`cluster-ack: local_ops=${base.toFixed(0)} shipped_ops=${shipped.toFixed(0)} ratio_shipped_vs_local=${(shipped / base).toFixed(3)} databases=${DATABASES} concurrency=${CONCURRENCY}`)
      assert.isAbove(shipped, 0)
    }))
})

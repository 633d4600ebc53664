// Compaction is the store's own job on its own schedule: with RPC traffic only (no sync
// stream ever opened) the log of a busy database is compacted to the retained history,
// and a cursor from before it then gets a `history_compacted` resnapshot.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { v7 as uuidv7 } from "uuid"
import { startApp } from "./support/app.js"
import { rpc, sync } from "@cairn/testkit/Wire"

const compacted = (base: string) =>
  Effect.promise(async () => {
    const { metrics } = (await (await fetch(`${base}/__test/metrics`)).json()) as {
      metrics: ReadonlyArray<{ name: string; count: number }>
    }
    return metrics.filter((m) => m.name === "cairn_sync_compacted_commits_total").reduce((n, m) => n + m.count, 0)
  })

describe("compaction through the real App", () => {
  it.scopedLive("happens under RPC-only traffic, on the store's schedule", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_SYNC_RETAINED_COMMITS: "2", CAIRN_SYNC_COMPACT_EVERY: "50 millis" } })
      const token = yield* app.token({ sub: "alice", org: "acme" })
      // A cursor at the very start of the log, taken before any commit.
      const scope = { entities: [{ from: { kind: "entity", name: "Project" } }] }
      const snapshot = yield* sync(app, token, "SyncSnapshot", { scope })
      const cursor = (snapshot.value as { checkpoint: { cursor: string } }).checkpoint.cursor
      const before = yield* compacted(app.base)
      for (let i = 0; i < 10; i++) {
        const created = yield* rpc(app, token, "Mutate", {
          operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
          input: { name: `P${i}` },
          invocationId: uuidv7()
        })
        assert.strictEqual((created.value as { outcome: string }).outcome, "committed")
      }
      // No sync stream is open; the store's job alone compacts (polled, not timed).
      // Ten commits, two retained: eight lose their change payloads, in one run of the job or several.
      const after = yield* compacted(app.base).pipe(
        Effect.filterOrFail((n) => n - before >= 8, () => "not yet"),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(200))))
      )
      assert.strictEqual(after - before, 8)
      const resumed = yield* sync(app, token, "SyncChanges", { scope, cursor, live: false })
      assert.deepStrictEqual(resumed.value, {
        _tag: "Resnapshot",
        reason: "history_compacted",
        message: "The change history after this cursor is no longer retained; discard local data and take a new snapshot."
      })
    })
  )
})

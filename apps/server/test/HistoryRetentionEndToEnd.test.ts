// Receipts and commit headers past their retention are pruned by the store's compaction job, and an
// invocation id older than the retained receipts is refused with `invocation_conflict` (never decided
// again), while newer ones replay their stored receipts. Through the real App, restarted on the same
// data directory with a short retention (so which receipts are "old" does not depend on timing: their
// invocation ids carry their time, minted two hours in the past).
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Schedule } from "effect"
import { v7 as uuidv7 } from "uuid"
import { mcp, rpc, sync } from "@cairn/testkit/Wire"
import { startApp } from "./support/app.js"

const createProject = (name: string, invocationId: string) => ({
  operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
  input: { name },
  invocationId
})

const pruned = (base: string, kind: string) =>
  Effect.promise(async () => {
    const { metrics } = (await (await fetch(`${base}/__test/metrics`)).json()) as {
      metrics: ReadonlyArray<{ name: string; count: number; tags: Record<string, string> }>
    }
    return metrics
      .filter((m) => m.name === "cairn_history_pruned_total" && m.tags.kind === kind)
      .reduce((n, m) => n + m.count, 0)
  })

const poll = Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(400)))
const hoursAgo = (hours: number) => uuidv7({ msecs: Date.now() - hours * 3_600_000 })

describe("history retention through the real App", () => {
  it.scopedLive("receipts past retention are pruned and their replays refused; newer ones replay; old headers go", () =>
    Effect.gen(function* () {
      // Default retention (30 days): everything is kept, an id from two hours ago is a new intent.
      const old = hoursAgo(2)
      const recent = uuidv7()
      const { dataDir, first, cursor } = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp()
          const token = yield* app.token({ sub: "alice", org: "acme" })
          const scope = { entities: [{ from: { kind: "entity", name: "Project" } }] }
          const snapshot = yield* sync(app, token, "SyncSnapshot", { scope })
          const first = yield* rpc(app, token, "Mutate", createProject("Old", old))
          assert.strictEqual(first.value?.outcome, "committed", first.text)
          for (let i = 0; i < 5; i++) {
            const created = yield* rpc(app, token, "Mutate", createProject(`P${i}`, i === 4 ? recent : uuidv7()))
            assert.strictEqual(created.value?.outcome, "committed", created.text)
          }
          // Still retained: the old id replays its receipt.
          assert.deepStrictEqual((yield* rpc(app, token, "Mutate", createProject("Old", old))).value, first.value)
          return { dataDir: app.dataDir, first: first.value, cursor: (snapshot.value as { checkpoint: { cursor: string } }).checkpoint.cursor }
        })
      )

      // Restarted with one hour of receipts, no commit header kept past its payload, one payload kept.
      const app = yield* startApp({
        dataDir,
        env: {
          CAIRN_RECEIPT_RETENTION: "1 hours",
          CAIRN_COMMIT_RETENTION: "0 millis",
          CAIRN_SYNC_RETAINED_COMMITS: "1",
          CAIRN_SYNC_COMPACT_EVERY: "50 millis"
        }
      })
      const token = yield* app.token({ sub: "alice", org: "acme" })
      // Activates the database (its compaction job runs while it is open); a query touches no receipt.
      const recentReplay = yield* rpc(app, token, "Mutate", createProject("P4", recent))
      assert.strictEqual(recentReplay.value?.outcome, "committed", recentReplay.text)
      yield* pruned(app.base, "receipt").pipe(
        Effect.filterOrFail((n) => n >= 1, () => "not yet"),
        Effect.retry(poll)
      )
      // Five headers lost their payload (one kept): all five go (polled, the job may take turns).
      yield* pruned(app.base, "commit").pipe(
        Effect.filterOrFail((n) => n >= 5, () => "not yet"),
        Effect.retry(poll)
      )

      // The replay of the pruned receipt is refused, with the reason and what to do; nothing applied.
      const replay = yield* rpc(app, token, "Mutate", createProject("Old", old))
      assert.strictEqual(replay.error?.code, "invocation_conflict", replay.text)
      assert.include(replay.error?.message, "older than the receipts this database retains")
      assert.include(replay.error?.message, "mint a new invocationId")
      assert.notInclude(replay.text, dataDir)
      // The same answer on MCP (one engine).
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const viaMcp = yield* mcp(app, agent, "mutate", createProject("Old", old))
      assert.strictEqual(viaMcp.error?.code, "invocation_conflict", viaMcp.text)
      assert.include(viaMcp.error?.message, "older than the receipts this database retains")
      // So is a never-seen intent under an id from before the horizon (it cannot be told from a lost replay).
      const stale = yield* rpc(app, token, "Mutate", createProject("Stale", hoursAgo(3)))
      assert.strictEqual(stale.error?.code, "invocation_conflict", stale.text)
      const names = yield* rpc(app, token, "Query", {
        query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } }, page: { first: 50 } }
      })
      const listed = (names.value.rows as Array<{ name: string }>).map((r) => r.name).sort()
      assert.deepStrictEqual(listed, ["Old", "P0", "P1", "P2", "P3", "P4"])

      // Newer receipts replay exactly; a new intent with a fresh id commits.
      assert.deepStrictEqual((yield* rpc(app, token, "Mutate", createProject("P4", recent))).value, recentReplay.value)
      const fresh = yield* rpc(app, token, "Mutate", createProject("Fresh", uuidv7()))
      assert.strictEqual(fresh.value?.outcome, "committed", fresh.text)
      assert.notDeepEqual(fresh.value, first)

      // A cursor from before the pruned history takes the existing safe path: a resnapshot.
      const scope = { entities: [{ from: { kind: "entity", name: "Project" } }] }
      const resumed = yield* sync(app, token, "SyncChanges", { scope, cursor, live: false })
      assert.strictEqual(resumed.value?._tag, "Resnapshot", resumed.text)

      // The file holds no receipt of the old id, and only the headers still needed (the last ones).
      const [file] = readdirSync(join(dataDir, "databases")).filter((f) => f.endsWith(".sqlite"))
      const db = new Database(join(dataDir, "databases", file!), { readonly: true })
      try {
        assert.isUndefined(db.prepare("SELECT 1 FROM _cairn_receipts WHERE invocation_id = ?").get(old))
        assert.isDefined(db.prepare("SELECT 1 FROM _cairn_receipts WHERE invocation_id = ?").get(recent))
        const positions = db.prepare("SELECT min(position) AS lo, max(position) AS hi FROM _cairn_commits").get() as { lo: number; hi: number }
        assert.strictEqual(positions.hi, 7)
        assert.isAbove(positions.lo, 5)
      } finally {
        db.close()
      }
    })
  , 60_000)
})

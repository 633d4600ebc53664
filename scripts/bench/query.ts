/**
 * `npm run bench -- query`: the planner's throughput for an indexed, filtered page of 50
 * Task rows against the same SELECT through a raw better-sqlite3 prepared statement in
 * the same run, then the same page over 10k and 1M rows (an indexed page must not grow
 * with the table). Prints `query: qps=.. baseline=.. ratio=..` (planner / raw) and
 * `query-scale: ratio_1M_vs_10k=..` (per-query time at 1M over time at 10k). Rates are per CPU
 * second of this process (see `timeIt`); `cpu_us_per_query` is the planner's CPU per query. Every call is made
 * as a request makes it: a new principal object (one of 200 users in turn), its view from the
 * tracker's policy (an admin: every Task row), another assignee.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { compile } from "@cairn/catalog/Catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { Policy } from "@cairn/policy"
import { trackerPolicy } from "@cairn/tracker/policy"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { Layout } from "@cairn/store"
import { tracker } from "@cairn/tracker/tracker"

const ASSIGNEES = 50
const PAGE = 50
const ROUNDS = 5
/** Distinct callers taking turns: each has its own view, cursor binding and plan-cache class lookup. */
const USERS = 200

const catalog = Effect.runSync(compile(tracker))
const policy = Effect.runSync(Policy.compile(catalog, trackerPolicy))
const document = (assignee: string): QueryDocumentV1 => ({
  version: 1,
  from: { kind: "entity", name: "Task" },
  where: { op: "eq", path: ["assigneeId"], value: assignee },
  select: { id: { path: ["id"] }, title: { path: ["title"] }, status: { path: ["status"] }, priority: { path: ["priority"] } },
  page: { first: PAGE }
})
const rawSql = `SELECT "id", "title", "status", "priority" FROM "Task" WHERE "assigneeId" = ? ORDER BY "id" LIMIT ${PAGE + 1}`

/** Seeds `rows` tasks with raw prepared inserts in one transaction. */
const seed = (filename: string, rows: number) => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  for (const ddl of Layout.catalogDdl(catalog)) db.exec(ddl)
  db.exec(`CREATE TABLE IF NOT EXISTS "_cairn_commits" ("position" INTEGER PRIMARY KEY)`)
  const task = catalog.entity("Task")!
  const columns = ["id", ...task.fields.map((f) => f.name)]
  const insert = db.prepare(`INSERT INTO "Task" (${columns.map(Layout.quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
  const at = "2026-01-01T00:00:00.000Z"
  db.transaction(() => {
    for (let i = 0; i < rows; i++) {
      const record = {
        id: `t${String(i).padStart(8, "0")}`,
        projectId: `P${i % 100}`,
        title: `task number ${i}`,
        status: i % 3 === 0 ? "done" : "open",
        assigneeId: `u${i % ASSIGNEES}`,
        priority: (i % 5) + 1,
        dueDate: `2026-${String((i % 12) + 1).padStart(2, "0")}-01`,
        createdAt: at,
        updatedAt: at
      }
      const stored = Layout.encodeRecord(task, record)
      insert.run(...columns.map((c) => stored[c] ?? null))
    }
  })()
  db.exec(`INSERT INTO "_cairn_commits" ("position") VALUES (1)`)
  db.close()
}

/**
 * The process's CPU time (user + system, seconds) for `body`: both sides are single-threaded
 * loops, and on a shared machine CPU time is what stays comparable when the scheduler preempts us.
 */
const timeIt = async (iterations: number, body: (i: number) => unknown | Promise<unknown>) => {
  const start = process.cpuUsage()
  await body(iterations)
  const used = process.cpuUsage(start)
  return (used.user + used.system) / 1e6
}

/** Best-of-rounds queries per second of the planner and of the raw statement on one file. */
const measure = async (filename: string, iterations: number) => {
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(QueryPlanner.Default, SqliteClient.layer({ filename }), QueryLimits.layer()).pipe(
      Layer.provide(Sealer.layer(Redacted.make("bench-secret")))
    )
  )
  const reader = new Database(filename, { readonly: true })
  const statements = new Map<string, Database.Statement>()
  const loop = (n: number) =>
    Effect.gen(function* () {
      const planner = yield* QueryPlanner
      const sql = yield* SqlClient.SqlClient
      // As `Database.values` reads for the planner: cached statements in raw mode on the read connection.
      const database = {
        id: "bench",
        sql,
        values: (text: string, params: ReadonlyArray<unknown>) =>
          Effect.sync(() => {
            let s = statements.get(text)
            if (s === undefined) statements.set(text, (s = reader.prepare(text).raw(true)))
            return s.all(...params) as ReadonlyArray<ReadonlyArray<unknown>>
          })
      }
      for (let i = 0; i < n; i++) {
        // As a request does: a new principal object (a new token of the same person), its view
        // from the policy, and another filter value every call.
        const caller = new Principal({ subject: `user${i % USERS}`, roles: ["admin"], scopes: [], claims: { jti: `j${i}` }, databaseKey: DatabaseKey.make("bench") })
        const view = policy.view(caller)
        const result = yield* planner.run({ view, principal: caller, database, request: { query: document(`u${i % ASSIGNEES}`) } })
        if (result.rows.length !== PAGE || result.cursor === undefined) return yield* Effect.dieMessage("unexpected page")
      }
    })
  const raw = new Database(filename, { readonly: true })
  const statement = raw.prepare(rawSql)
  await runtime.runPromise(loop(200)) // warm up: prepared statements, JIT
  for (let i = 0; i < 200; i++) statement.all(`u${i % ASSIGNEES}`)
  let planner = 0
  let baseline = 0
  for (let round = 0; round < ROUNDS; round++) {
    const p = await timeIt(iterations, (n) => runtime.runPromise(loop(n)))
    const b = await timeIt(iterations, (n) => {
      for (let i = 0; i < n; i++) if (statement.all(`u${i % ASSIGNEES}`).length !== PAGE + 1) throw new Error("unexpected page")
    })
    planner = Math.max(planner, iterations / p)
    baseline = Math.max(baseline, iterations / b)
  }
  raw.close()
  await runtime.dispose()
  return { planner, baseline }
}

export const run = async (): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-query-"))
  try {
    const small = join(dir, "10k.sqlite")
    const large = join(dir, "1m.sqlite")
    seed(small, 10_000)
    const atSmall = await measure(small, 2_000)
    console.log(
      `query: qps=${atSmall.planner.toFixed(0)} baseline=${atSmall.baseline.toFixed(0)} ratio=${(atSmall.planner / atSmall.baseline).toFixed(3)} cpu_us_per_query=${(1e6 / atSmall.planner).toFixed(0)} baseline_cpu_us_per_query=${(1e6 / atSmall.baseline).toFixed(0)}`
    )
    seed(large, 1_000_000)
    const atLarge = await measure(large, 2_000)
    console.log(`query-scale: ratio_1M_vs_10k=${(atSmall.planner / atLarge.planner).toFixed(3)}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

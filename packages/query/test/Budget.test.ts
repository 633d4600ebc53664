// The rows-examined budget over a table larger than it: filters no index serves and
// sorts over too many candidates fail `query_budget_exceeded` (deterministically),
// while indexed filters, dense filters and index walks (NULL groups included) page
// through the whole table, because a continuation seeks instead of re-scanning.
import { assert, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { toPublicBody } from "@cairn/domain/PublicError"
import { defaultQueryLimits, QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { clear, fullView, insert, TestLive, who } from "./support.js"

const BUDGET = 500
const TASKS = 3000
const at = "2026-01-01T00:00:00.000Z"

const seed = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* clear
  yield* insert("Project", ["big", "small"].map((id) => ({ id, name: id, archived: false, createdAt: at, updatedAt: at })))
  yield* sql.withTransaction(
    insert(
      "Task",
      Array.from({ length: TASKS }, (_, i) => ({
        id: `t${String(i).padStart(5, "0")}`,
        projectId: i % 30 === 0 ? "small" : "big",
        title: i === 1234 ? "needle" : `task ${i % 97}`,
        status: i % 3 === 0 ? "done" : "open",
        ...(i === 1234 ? { assigneeId: "finder" } : i % 4 === 0 ? {} : { assigneeId: `u${i % 7}` }),
        ...(i % 3 === 0 ? {} : { dueDate: `2026-01-${String((i % 28) + 1).padStart(2, "0")}` }),
        createdAt: at,
        updatedAt: at
      }))
    )
  )
})

const task = (query: Omit<QueryDocumentV1, "version" | "from" | "select">): QueryDocumentV1 => ({
  version: 1,
  from: { kind: "entity", name: "Task" },
  select: { id: { path: ["id"] } },
  ...query
})

const page = (query: QueryDocumentV1) =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    return yield* planner.run({ view: fullView, principal: who("alice"), database: { id: "db-1", sql }, request: { query } })
  }).pipe(Effect.provideService(QueryLimits, { ...defaultQueryLimits, maxRowsExamined: BUDGET }))

/** Pages through to the end; returns how many rows and pages it took. */
const all = (query: QueryDocumentV1) =>
  Effect.gen(function* () {
    const ids: Array<unknown> = []
    let after: string | undefined
    let pages = 0
    do {
      const result = yield* page({ ...query, page: { ...query.page, ...(after === undefined ? {} : { after }) } })
      ids.push(...result.rows.map((r) => r["id"]))
      after = result.cursor
      pages++
    } while (after !== undefined)
    return { ids, pages }
  })

layer(TestLive)("rows-examined budget", (it) => {
  it.effect("a filter no index serves fails instead of scanning the table, with the same answer every time", () =>
    Effect.gen(function* () {
      yield* seed
      const sparse = task({ where: { op: "eq", path: ["title"], value: "needle" } })
      const error = yield* Effect.flip(page(sparse))
      assert.strictEqual(error._tag, "QueryBudgetExceeded")
      assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, "maxRowsExamined")
      assert.include(error.message, `more than ${BUDGET}`)
      assert.include(error.message, "indexed field")
      const again = yield* Effect.flip(page(sparse))
      assert.strictEqual(JSON.stringify(toPublicBody(again)), JSON.stringify(toPublicBody(error)))
      // The same filter beside an equality an index serves examines a handful of rows.
      const served = yield* page(task({ where: { op: "and", filters: [{ op: "eq", path: ["assigneeId"], value: "finder" }, { op: "eq", path: ["title"], value: "needle" }] } }))
      assert.deepStrictEqual(served.rows, [{ id: "t01234" }])
    }))

  it.effect("sorting more candidates than the budget fails; an index seek that narrows them succeeds", () =>
    Effect.gen(function* () {
      yield* seed
      const error = yield* Effect.flip(page(task({ order: [{ path: ["title"], direction: "asc" }] })))
      assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, "maxRowsExamined")
      assert.include(error.message, "sorting")
      // 100 tasks in the small project: few enough to sort, through every page.
      const small = yield* all(task({ where: { op: "eq", path: ["projectId"], value: "small" }, order: [{ path: ["title"], direction: "desc" }], page: { first: 7 } }))
      assert.strictEqual(small.ids.length, TASKS / 30)
      assert.strictEqual(new Set(small.ids).size, TASKS / 30)
    }))

  it.effect("dense filters and index walks page through the whole table within the budget", () =>
    Effect.gen(function* () {
      yield* seed
      // Matches every row: each page stops after first + 1 rows, and continues by seeking.
      const dense = yield* all(task({ where: { op: "startsWith", path: ["title"], value: "task" }, page: { first: 200 } }))
      assert.strictEqual(dense.ids.length, TASKS - 1)
      // An ordered index walk with a 1000-row NULL group, ascending and descending.
      for (const direction of ["asc", "desc"] as const) {
        const walked = yield* all(task({ order: [{ path: ["dueDate"], direction }], page: { first: 200 } }))
        assert.strictEqual(walked.ids.length, TASKS)
        assert.strictEqual(new Set(walked.ids).size, TASKS)
        assert.strictEqual(walked.pages, TASKS / 200)
      }
      // An equality prefix plus the walk: open tasks of the big project by status order.
      const open = yield* all(task({ where: { op: "eq", path: ["projectId"], value: "big" }, order: [{ path: ["status"], direction: "asc" }], page: { first: 200 } }))
      assert.strictEqual(open.ids.length, TASKS - TASKS / 30)
    }))
})

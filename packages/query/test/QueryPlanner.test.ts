// The shape of an answer: plain JSON rows keyed by the select names (booleans as
// booleans, absent values as null, any name a caller picks), the basis the page was
// read at, and a cursor only while another page exists.
import { assert, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { Position } from "@cairn/store"
import { clear, commit, fullView, insert, TestLive, who } from "./support.js"

const at = "2026-01-01T00:00:00.000Z"

const run = (query: QueryDocumentV1) =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    return yield* planner.run({ view: fullView, principal: who("alice"), database: { id: "db-1", sql }, request: { query } })
  })

layer(TestLive)("query answers", (it) => {
  it.effect("rows are plain JSON keyed by the select names", () =>
    Effect.gen(function* () {
      yield* clear
      yield* insert("Project", [
        { id: "P1", name: "one", archived: true, createdAt: at, updatedAt: at },
        { id: "P2", name: "two", archived: false, description: "d", createdAt: at, updatedAt: at }
      ])
      yield* insert("Task", [
        { id: "T1", projectId: "P1", title: "a", status: "open", priority: 2, createdAt: at, updatedAt: at },
        { id: "T2", projectId: "P2", title: "b", status: "done", dueDate: "2026-02-01", createdAt: at, updatedAt: at }
      ])
      const result = yield* run({
        version: 1,
        from: { kind: "entity", name: "Task" },
        select: {
          // A computed key: an own property named __proto__, as JSON.parse would make it.
          ["__proto__"]: { path: ["id"] },
          "Title with spaces": { path: ["title"] },
          priority: { path: ["priority"] },
          due: { path: ["dueDate"] },
          archived: { path: ["project", "archived"] },
          description: { path: ["project", "description"] },
          project: { path: ["project", "id"] }
        }
      })
      assert.strictEqual(
        JSON.stringify(result.rows),
        `[{"__proto__":"T1","Title with spaces":"a","priority":2,"due":null,"archived":true,"description":null,"project":"P1"},` +
          `{"__proto__":"T2","Title with spaces":"b","priority":null,"due":"2026-02-01","archived":false,"description":"d","project":"P2"}]`
      )
      assert.strictEqual(Object.getPrototypeOf(result.rows[0]), Object.prototype)
      assert.isUndefined(result.cursor)
    }))

  it.effect("the basis is the catalog token and the last commit position, read with the page", () =>
    Effect.gen(function* () {
      yield* clear
      const query: QueryDocumentV1 = { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } } }
      const empty = yield* run(query)
      assert.deepStrictEqual(empty, { rows: [], basis: { catalogToken: fullView.token, position: Position.encode(0) } })
      for (const p of [1, 2, 3]) yield* commit(p)
      const later = yield* run(query)
      assert.strictEqual(later.basis.position, Position.encode(3))
    }))

  it.effect("a cursor exactly while another page exists", () =>
    Effect.gen(function* () {
      yield* clear
      yield* insert("Task", ["a", "b", "c", "d"].map((id) => ({ id, projectId: "P", title: id, status: "open", createdAt: at, updatedAt: at })))
      const query: QueryDocumentV1 = { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, page: { first: 2 } }
      const first = yield* run(query)
      assert.deepStrictEqual(first.rows, [{ id: "a" }, { id: "b" }])
      const second = yield* run({ ...query, page: { first: 2, after: first.cursor! } })
      assert.deepStrictEqual(second.rows, [{ id: "c" }, { id: "d" }])
      assert.isUndefined(second.cursor)
    }))

  // Found by the property test (seed 728493036): a filter through a join let SQLite turn
  // the LEFT JOIN into an inner join and loop over Project first, so an id-ordered walk
  // came back in project order (t3 before t100).
  it.effect("a filter through a relationship keeps the walk's order", () =>
    Effect.gen(function* () {
      yield* clear
      yield* insert("Project", [
        { id: "P0", name: "é", archived: false, createdAt: at, updatedAt: at },
        { id: "P1", name: "é", archived: false, createdAt: at, updatedAt: at },
        { id: "P2", name: "alpha", archived: false, createdAt: at, updatedAt: at }
      ])
      yield* insert("Task", [
        { id: "t3", projectId: "P0", title: "a", status: "open", createdAt: at, updatedAt: at },
        { id: "t100", projectId: "P1", title: "a", status: "open", createdAt: at, updatedAt: at },
        { id: "t2", projectId: "P2", title: "a", status: "open", createdAt: at, updatedAt: at }
      ])
      const query: QueryDocumentV1 = {
        version: 1,
        from: { kind: "entity", name: "Task" },
        where: { op: "eq", path: ["project", "name"], value: "é" },
        select: { id: { path: ["id"] } },
        order: [],
        page: { first: 1 }
      }
      const first = yield* run(query)
      assert.deepStrictEqual(first.rows, [{ id: "t100" }])
      const second = yield* run({ ...query, page: { first: 1, after: first.cursor! } })
      assert.deepStrictEqual(second.rows, [{ id: "t3" }])
      assert.isUndefined(second.cursor)
    }))
})

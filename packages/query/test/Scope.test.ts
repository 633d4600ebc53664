// Row scopes: the tracker's real policy (memberships through `exists`, comments scoped
// through `task.projectId`), a hand-built view whose visible tasks point at hidden
// projects (the join must read as absent, never leak), and `scopeSql` checked against
// the policy's in-memory evaluator over random data, as mutation guards and sync use it.
import { assert, describe, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Runtime } from "effect"
import fc from "fast-check"
import { RowScope } from "@cairn/catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { Policy } from "@cairn/policy"
import { inScope, type Lookup, type RecordValue } from "@cairn/policy/Evaluate"
import { defaultQueryLimits, QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { scopeSql } from "@cairn/query/ScopeSql"
import { trackerPolicy } from "@cairn/testkit/fixture/policy"
import { aliceView } from "./arbitraries.js"
import { catalog, clear, type Data, insert, TestLive } from "./support.js"

const at = "2026-01-01T00:00:00.000Z"
const stamp = { createdAt: at, updatedAt: at }
const policy = Effect.runSync(Policy.compile(catalog, trackerPolicy))

const person = (subject: string, roles: ReadonlyArray<string> = []) =>
  new Principal({ subject, roles, scopes: [], claims: { sub: subject }, databaseKey: DatabaseKey.make("acme") })

const data: Data = {
  Project: [
    { id: "P1", name: "one", archived: false, description: "first", ...stamp },
    { id: "P2", name: "two", archived: true, description: "second", ...stamp }
  ],
  Member: [
    { id: "M1", projectId: "P1", subject: "alice", role: "owner", ...stamp },
    { id: "M2", projectId: "P2", subject: "dave", role: "owner", ...stamp }
  ],
  Task: [
    { id: "T1", projectId: "P1", title: "mine", status: "open", ...stamp },
    { id: "T2", projectId: "P2", title: "theirs, assigned to u1", status: "open", assigneeId: "u1", ...stamp },
    { id: "T3", projectId: "P2", title: "theirs", status: "done", ...stamp },
    { id: "T4", projectId: "P9", title: "dangling, assigned to u1", status: "open", assigneeId: "u1", ...stamp }
  ],
  Comment: [
    { id: "C1", taskId: "T1", body: "on mine", authorId: "alice", ...stamp },
    { id: "C2", taskId: "T2", body: "on theirs", authorId: "dave", ...stamp },
    { id: "C3", taskId: "T9", body: "dangling", authorId: "dave", ...stamp }
  ]
}

const seed = (d: Data) =>
  Effect.gen(function* () {
    yield* clear
    for (const [entity, records] of Object.entries(d)) yield* insert(entity, records)
  })

const query = (view: View, doc: Omit<QueryDocumentV1, "version" | "from">, from = "Task") =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    const result = yield* planner.run({
      view,
      principal: person("alice"),
      database: { id: "db-1", sql },
      request: { query: { version: 1, from: { kind: "entity", name: from }, ...doc } }
    })
    return result.rows
  })

const ids = { id: { path: ["id"] } }

layer(TestLive)("row scope", (it) => {
  it.effect("the tracker policy scopes tasks and comments (through task.projectId) to memberships", () =>
    Effect.gen(function* () {
      yield* seed(data)
      const alice = policy.view(person("alice"))
      assert.deepStrictEqual(yield* query(alice, { select: ids }), [{ id: "T1" }])
      assert.deepStrictEqual(yield* query(alice, { select: ids }, "Comment"), [{ id: "C1" }])
      assert.deepStrictEqual(yield* query(alice, { select: ids }, "Project"), [{ id: "P1" }])
      const erin = policy.view(person("erin"))
      assert.deepStrictEqual(yield* query(erin, { select: ids }), [])
      assert.deepStrictEqual(yield* query(erin, { select: ids }, "Comment"), [])
      const admin = policy.view(person("root", ["admin"]))
      assert.deepStrictEqual(yield* query(admin, { select: ids }), [{ id: "T1" }, { id: "T2" }, { id: "T3" }, { id: "T4" }])
      assert.deepStrictEqual(yield* query(admin, { select: { id: { path: ["id"] }, p: { path: ["task", "project", "name"] } } }, "Comment"), [
        { id: "C1", p: "one" },
        { id: "C2", p: "two" },
        { id: "C3", p: null }
      ])
    }))

  it.effect("a join to a row outside the scope reads as absent: in select, where and order", () =>
    Effect.gen(function* () {
      yield* seed(data)
      // alice sees T1 (her project) and T2, T4 (assigned to u1); of the projects, only P1.
      const select = { id: { path: ["id"] }, name: { path: ["project", "name"] }, archived: { path: ["project", "archived"] } }
      assert.deepStrictEqual(yield* query(aliceView, { select }), [
        { id: "T1", name: "one", archived: false },
        { id: "T2", name: null, archived: null },
        { id: "T4", name: null, archived: null }
      ])
      assert.deepStrictEqual(yield* query(aliceView, { select: ids, where: { op: "eq", path: ["project", "archived"], value: true } }), [])
      assert.deepStrictEqual(yield* query(aliceView, { select: ids, where: { op: "ne", path: ["project", "name"], value: "zzz" } }), [{ id: "T1" }])
      assert.deepStrictEqual(
        yield* query(aliceView, { select: ids, where: { op: "isNull", path: ["project", "description"] } }),
        [{ id: "T2" }, { id: "T4" }]
      )
      assert.deepStrictEqual(
        yield* query(aliceView, { select: ids, order: [{ path: ["project", "name"], direction: "desc" }] }),
        [{ id: "T1" }, { id: "T4" }, { id: "T2" }]
      )
    }))

  it.effect("a scope of none reads nothing, whatever the budget", () =>
    Effect.gen(function* () {
      yield* seed(data)
      const none = new View(catalog, { entity: () => true, field: () => true, operation: () => true, rowScope: () => RowScope.none })
      const rows = yield* query(none, { select: ids, order: [{ path: ["title"], direction: "asc" }] }).pipe(
        Effect.provideService(QueryLimits, { ...defaultQueryLimits, maxRowsExamined: 1 })
      )
      assert.deepStrictEqual(rows, [])
    }))

  describe("scopeSql", () => {
    const principals = [person("alice"), person("bob"), person("carol"), person("root", ["admin"])]
    const dataArb = fc
      .record({
        members: fc.array(fc.record({ project: fc.integer({ min: 0, max: 3 }), subject: fc.constantFrom("alice", "bob", "carol"), role: fc.constantFrom("owner", "editor", "viewer") }), { maxLength: 8 }),
        tasks: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 10 }),
        comments: fc.array(fc.record({ task: fc.integer({ min: 0, max: 11 }), author: fc.constantFrom("alice", "bob") }), { maxLength: 10 })
      })
      .map(({ comments, members, tasks }): Data => ({
        Project: [0, 1, 2].map((i) => ({ id: `P${i}`, name: `p${i}`, archived: false, ...stamp })),
        Member: members.map((m, i) => ({ id: `M${i}`, projectId: `P${m.project}`, subject: m.subject, role: m.role, ...stamp })),
        Task: tasks.map((p, i) => ({ id: `T${i}`, projectId: `P${p}`, title: `t${i}`, status: "open", ...stamp })),
        Comment: comments.map((c, i) => ({ id: `C${i}`, taskId: `T${c.task}`, body: "b", authorId: c.author, ...stamp })),
        Label: [0, 3].map((p, i) => ({ id: `L${i}`, projectId: `P${p}`, name: "bug", color: "#ff0000", ...stamp }))
      }))

    it.effect("selects exactly the rows the in-memory evaluator puts in scope, for every entity and principal", () =>
      Effect.gen(function* () {
        const runtime = yield* Effect.runtime<SqlClient.SqlClient>()
        const check = (d: Data) =>
          Effect.gen(function* () {
            yield* seed(d)
            const sql = yield* SqlClient.SqlClient
            const lookup: Lookup = (entity, field, value) => (d[entity] ?? []).filter((r: RecordValue) => r[field] === value)
            for (const principal of principals) {
              const view = policy.view(principal)
              for (const entity of catalog.entities) {
                const rows = yield* sql<{ id: string }>`SELECT "t"."id" AS "id" FROM ${sql(entity.name)} AS "t" WHERE ${scopeSql(view, entity.name, "t")} ORDER BY "t"."id"`
                const expected = (d[entity.name] ?? [])
                  .filter((r) => inScope(catalog, entity.name, view.rowScope(entity.name), r, lookup))
                  .map((r) => r["id"] as string)
                  .sort()
                assert.deepStrictEqual(rows.map((r) => r.id), expected, `${principal.subject} ${entity.name}`)
              }
            }
          })
        yield* Effect.promise(() => fc.assert(fc.asyncProperty(dataArb, (d) => Runtime.runPromise(runtime)(check(d))), { numRuns: 60 }))
      }))
  })
})


// Property tests: random Task queries over random tracker data, through the planner on
// a real SQLite file, against the in-memory reference evaluator. Every page is checked,
// pagination runs to the end (no duplicate, no gap), and concurrent inserts between
// pages appear exactly when they sort after the cursor. A tiny rows-examined budget
// must never yield a wrong page: only the right one or `query_budget_exceeded`.
import { assert, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Either, Runtime } from "effect"
import fc from "fast-check"
import type { View } from "@cairn/catalog/View"
import type { QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import type { QueryResult } from "@cairn/domain/Query"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { Policy } from "@cairn/policy"
import { trackerPolicy } from "@cairn/testkit/fixture/policy"
import type { RecordValue } from "@cairn/policy/Evaluate"
import { defaultQueryLimits, QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { aliceView, dataArb, queryArb, taskArb, taskRecord } from "./arbitraries.js"
import { catalog, clear, type Data, fullView, insert, reference, TestLive, who } from "./support.js"

// The tracker policy's views of alice and bob are one policy class (their subjects are bound
// values), so their queries share cached plans; the admin's is another class.
const policy = Effect.runSync(Policy.compile(catalog, trackerPolicy))
const views: Record<string, View> = {
  full: fullView,
  alice: aliceView,
  policyAlice: policy.view(who("alice")),
  policyBob: policy.view(who("bob")),
  policyAdmin: policy.view(new Principal({ subject: "root", roles: ["admin"], scopes: [], claims: {}, databaseKey: DatabaseKey.make("acme") }))
}
const viewArb = fc.constantFrom("full", "alice", "policyAlice", "policyBob", "policyAdmin")

const seed = (data: Data) =>
  Effect.gen(function* () {
    yield* clear
    for (const entity of ["Project", "Member", "Task"]) yield* insert(entity, data[entity] ?? [])
  })

const page = (view: View, doc: QueryDocumentV1, after: string | undefined) =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    return yield* planner.run({
      view,
      principal: who("alice"),
      database: { id: "db-1", sql },
      request: { query: { ...doc, page: { ...doc.page, ...(after === undefined ? {} : { after }) } } }
    })
  })

const property = <A>(arb: fc.Arbitrary<A>, check: (a: A) => Effect.Effect<void, unknown, QueryPlanner | QueryLimits | SqlClient.SqlClient>, numRuns: number) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<QueryPlanner | QueryLimits | SqlClient.SqlClient>()
    yield* Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(arb, (a) => Runtime.runPromise(runtime)(check(a))),
        { numRuns }
      )
    )
  })

layer(TestLive)("QueryPlanner against the reference evaluator", (it) => {
  it.effect("every page equals the reference, through to the last page", () =>
    property(
      fc.record({ data: dataArb, doc: queryArb, view: viewArb }),
      ({ data, doc, view: name }) =>
        Effect.gen(function* () {
          const view = views[name]!
          yield* seed(data)
          const expected = reference(view, data, doc).rows.map((r) => r.output)
          const first = doc.page!.first!
          const got: Array<unknown> = []
          let after: string | undefined
          for (let n = 0; ; n++) {
            // A cursor that fails to advance would page forever.
            assert.isAtMost(n, expected.length, "pagination does not end")
            const result: QueryResult = yield* page(view, doc, after)
            assert.deepStrictEqual(result.rows, expected.slice(n * first, (n + 1) * first), `page ${n}`)
            assert.strictEqual(result.basis.catalogToken, view.token)
            got.push(...result.rows)
            // A cursor exactly when more rows remain.
            assert.strictEqual(result.cursor !== undefined, got.length < expected.length, `cursor after page ${n}`)
            if (result.cursor === undefined) break
            after = result.cursor
          }
          assert.deepStrictEqual(got, expected)
        }),
      300
    ))

  it.effect("rows inserted between pages appear exactly when they sort after the cursor", () =>
    property(
      fc.record({
        data: dataArb,
        doc: queryArb,
        view: viewArb,
        extra: fc.array(fc.array(taskArb, { maxLength: 4 }), { minLength: 1, maxLength: 4 })
      }),
      ({ data, doc, extra, view: name }) =>
        Effect.gen(function* () {
          const view = views[name]!
          yield* seed(data)
          const tasks: Array<RecordValue> = [...(data["Task"] ?? [])]
          const initial = new Set(tasks.map((t) => t["id"]))
          const inserted: Array<{ readonly record: RecordValue; readonly after: RecordValue | undefined }> = []
          const got: Array<Record<string, unknown>> = []
          let after: string | undefined
          let batch = 0
          let serial = 0
          for (;;) {
            assert.isAtMost(got.length, tasks.length, "pagination does not end")
            const result: QueryResult = yield* page(view, doc, after)
            got.push(...(result.rows as Array<Record<string, unknown>>))
            if (result.cursor === undefined) break
            after = result.cursor
            const last = tasks.find((t) => t["id"] === got[got.length - 1]!["id"])
            const fresh = (extra[batch++] ?? []).map((t) => taskRecord(`n${serial++}`, t))
            yield* insert("Task", fresh)
            tasks.push(...fresh)
            inserted.push(...fresh.map((record) => ({ record, after: last })))
          }
          const ref = reference(view, { ...data, Task: tasks }, doc)
          const appears = new Set(initial)
          for (const { after: last, record } of inserted) {
            if (last && ref.matches(record) && ref.compareKeys(ref.keyOf(record), ref.keyOf(last)) > 0) appears.add(record["id"])
          }
          const expected = ref.rows.filter((r) => appears.has(r.output["id"])).map((r) => r.output)
          assert.deepStrictEqual(got, expected)
          assert.strictEqual(new Set(got.map((r) => r["id"])).size, got.length)
        }),
      150
    ))

  it.effect("a tiny rows-examined budget gives the right page or query_budget_exceeded, never a wrong page", () =>
    property(
      fc.record({ data: dataArb, doc: queryArb, view: viewArb, budget: fc.integer({ min: 1, max: 12 }) }),
      ({ budget, data, doc, view: name }) =>
        Effect.gen(function* () {
          const view = views[name]!
          yield* seed(data)
          const expected = reference(view, data, doc).rows.map((r) => r.output)
          const first = doc.page!.first!
          let after: string | undefined
          for (let n = 0; ; n++) {
            assert.isAtMost(n, expected.length, "pagination does not end")
            const result = yield* Effect.either(page(view, doc, after).pipe(Effect.provideService(QueryLimits, { ...defaultQueryLimits, maxRowsExamined: budget })))
            if (Either.isLeft(result)) {
              assert.strictEqual(result.left._tag, "QueryBudgetExceeded")
              return
            }
            assert.deepStrictEqual(result.right.rows, expected.slice(n * first, (n + 1) * first))
            if (result.right.cursor === undefined) return
            after = result.right.cursor
          }
        }),
      150
    ))
})


// The query decoder's answer stays bounded whatever the request: a query with 40,000
// malformed select entries (whose issue formatting once held the event loop for over a
// minute) is refused by its size before any schema work, or, where the limits allow that
// many, reported by its first problem; a small one with many mistakes lists 20 places and
// a summary. Sizes and counts are asserted, never time.
import { assert, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { QueryRequest } from "@cairn/domain/Query"
import { isSummaryIssue, maxIssues } from "@cairn/domain/Decode"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"
import { decodeQueryRequest } from "@cairn/query/QueryRequestDecoder"
import { defaultQueryLimits, QueryLimits } from "@cairn/query/QueryLimits"

const malformedSelect = (n: number) => {
  const select: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) select[`f${i}`] = { path: 1 }
  return { query: { version: 1, from: { kind: "entity", name: "Task" }, select } }
}

const bounded = (error: PublicError) => {
  const issues = ("issues" in error ? error.issues : undefined) ?? []
  assert.isAtMost(issues.length, maxIssues + 1)
  assert.isBelow(error.message.length, 4_096)
  assert.isBelow(JSON.stringify(toPublicBody(error)).length, 4_096)
  return issues
}

const timed = <A, E, R>(label: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const start = performance.now()
    const a = yield* effect
    console.log(`${label}: ${(performance.now() - start).toFixed(1)} ms`)
    return a
  })

layer(QueryLimits.layer())("decodeQueryRequest", (it) => {
  it.effect("40,000 select entries are refused by their number, before any schema work", () =>
    Effect.gen(function* () {
      const error = yield* timed("query with 40,000 malformed select entries", Effect.flip(decodeQueryRequest(malformedSelect(40_000))))
      bounded(error)
      assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, "maxProjection")
      // The planner's own message for the same budget.
      assert.strictEqual(error.message, "/query/select: 40000 outputs requested; at most 32 are allowed. Select fewer paths.")
    }))

  it.effect("where the limits allow 40,000 select entries, malformed ones are reported by the first, briefly", () =>
    Effect.gen(function* () {
      const error = yield* timed(
        "query with 40,000 malformed select entries, maxProjection 100,000",
        Effect.flip(decodeQueryRequest(malformedSelect(40_000))).pipe(Effect.provideService(QueryLimits, { ...defaultQueryLimits, maxProjection: 100_000 }))
      )
      assert.strictEqual(error._tag, "InvalidQuery")
      const issues = bounded(error)
      assert.strictEqual(issues[0]!.path, "/query/select/f0/path")
      assert.isTrue(isSummaryIssue(issues[issues.length - 1]!))
    }))

  it.effect("a small query with many mistakes lists 20 places, then counts the rest", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(decodeQueryRequest(malformedSelect(30)))
      assert.strictEqual(error._tag, "InvalidQuery")
      const issues = bounded(error)
      assert.deepStrictEqual(
        issues.slice(0, maxIssues).map((i) => i.path),
        Array.from({ length: maxIssues }, (_, i) => `/query/select/f${i}/path`)
      )
      assert.deepStrictEqual(issues[maxIssues], { path: "/", message: "and 10 more problems not listed" })
      // Three listed in the message, then the other 17 listed and the 10 unlisted.
      assert.match(error.message, /^The query request is malformed: \/query\/select\/f0\/path: .*; and 27 more\.$/)
    }))

  it.effect("order terms and in lists beyond the planner's budgets are refused before decoding", () =>
    Effect.gen(function* () {
      const base = { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } } }
      const order = yield* Effect.flip(decodeQueryRequest({ query: { ...base, order: Array.from({ length: 100_000 }, () => ({ path: 1 })) } }))
      assert.strictEqual(order._tag === "QueryBudgetExceeded" && order.limit, "maxOrderTerms")
      bounded(order)
      const values = Array.from({ length: 520_000 }, (_, i) => i)
      const inList = yield* Effect.flip(
        decodeQueryRequest({ query: { ...base, where: { op: "and", filters: [{ op: "in", path: ["title"], value: values }] } } })
      )
      assert.strictEqual(inList._tag === "QueryBudgetExceeded" && inList.limit, "maxInValues")
      bounded(inList)
    }))

  it.effect("an operator that is not one is named only when it is short", () =>
    Effect.gen(function* () {
      const base = { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } } }
      const short = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: { op: "between" } } }))
      assert.include(short.message, `"between" is not a filter operator`)
      const long = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: { op: "x".repeat(60_000) } } }))
      assert.include(long.message, "a long string is not a filter operator")
      bounded(long)
    }))

  it.effect("alternatives at one path are still merged, and the summaries above them dropped", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        decodeQueryRequest({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, order: [{ path: ["id"], direction: "up" }] } })
      )
      assert.strictEqual(error._tag, "InvalidQuery")
      if (error._tag !== "InvalidQuery") return
      assert.deepStrictEqual(error.issues, [
        { path: "/query/order/0/direction", message: `Expected "asc", actual a string of 2 characters or Expected "desc", actual a string of 2 characters` }
      ])
    }))

  it.effect("a valid request decodes to what Effect's strict parse gives, key for key; an invalid one fails as it does", () =>
    Effect.gen(function* () {
      const select = { id: { path: ["id"] }, constructor: { path: ["title"] }, "0": { path: ["status"] } }
      const requests = [
        { query: { version: 1, from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["assigneeId"], value: "u1" }, select, page: { first: 50 } } },
        {
          ifCatalog: "c",
          query: {
            page: { after: "x", first: 2 },
            order: [{ direction: "desc", path: ["priority"] }],
            select,
            where: { op: "and", filters: [{ op: "in", path: ["status"], value: ["open", null] }, { op: "not", filter: { op: "isNull", path: ["project", "name"] } }] },
            from: { name: "Task", kind: "entity" },
            version: 1
          }
        }
      ]
      const strict = Schema.decodeUnknownSync(QueryRequest, { onExcessProperty: "error" })
      for (const request of requests) {
        const decoded = yield* decodeQueryRequest(request)
        const expected = strict(request)
        assert.deepStrictEqual(decoded, expected)
        // Same key order at every level (the schema's, then a record's own), fresh objects as Effect makes them.
        assert.strictEqual(JSON.stringify(decoded), JSON.stringify(expected))
        assert.notStrictEqual<unknown>(decoded.query, request.query)
        assert.notStrictEqual<unknown>(decoded.query.select, request.query.select)
      }
      const nested = yield* Effect.flip(
        decodeQueryRequest({ query: { ...requests[0]!.query, from: { kind: "entity", name: "Task", extra: 1 } } })
      )
      assert.strictEqual(nested._tag, "InvalidQuery")
      assert.deepStrictEqual("issues" in nested ? nested.issues?.map((i) => i.path) : undefined, ["/query/from/extra"])
    }))
})

import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { decodeQueryRequest } from "@cairn/query/QueryRequestDecoder"
import { QueryLimits } from "@cairn/query/QueryLimits"

const base = { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } } }
const leaf = { op: "eq", path: ["title"], value: "x" }

/** The three shapes that once overflowed the stack or failed in SQL prepare. */
export const hostile = {
  deepNot: () => {
    let where: unknown = leaf
    for (let i = 0; i < 3_000; i++) where = { op: "not", filter: where }
    return where
  },
  wideOr: () => ({ op: "or", filters: Array.from({ length: 20_000 }, (_, i) => ({ ...leaf, value: `t${i}` })) }),
  longIn: () => ({ op: "in", path: ["title"], value: Array.from({ length: 60_000 }, (_, i) => `t${i}`) })
}

describe("query filters are bounded before they are decoded", () => {
  it.effect("3,000 nested not, a 20,000-term or and a 60,000-value in are query_budget_exceeded", () =>
    Effect.gen(function* () {
      for (const [shape, limit] of [["deepNot", "maxFilterNodes"], ["wideOr", "maxFilterNodes"], ["longIn", "maxInValues"]] as const) {
        const error = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: hostile[shape]() } }))
        assert.strictEqual(error.code, "query_budget_exceeded", shape)
        assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, limit, shape)
        assert.include(error.message, "/query/where", shape)
      }
    }).pipe(Effect.provide(QueryLimits.layer())))

  it.effect("the same shapes nested inside an allowed filter fail the same way", () =>
    Effect.gen(function* () {
      const inside = { op: "and", filters: [leaf, hostile.longIn()] }
      const error = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: inside } }))
      assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, "maxInValues")
      assert.include(error.message, "/query/where/filters/1")
    }).pipe(Effect.provide(QueryLimits.layer())))

  it.effect("at the limits themselves a filter decodes", () =>
    Effect.gen(function* () {
      let where: unknown = leaf
      for (let i = 1; i < 8; i++) where = { op: "not", filter: where }
      const decoded = yield* decodeQueryRequest({ query: { ...base, where } })
      assert.deepStrictEqual<unknown>(decoded.query.where, where)
      const list = { op: "in", path: ["title"], value: Array.from({ length: 8 }, (_, i) => `t${i}`) }
      assert.deepStrictEqual<unknown>((yield* decodeQueryRequest({ query: { ...base, where: list } })).query.where, list)
      const tooDeep = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: { op: "not", filter: where } } }))
      assert.strictEqual(tooDeep._tag === "QueryBudgetExceeded" && tooDeep.limit, "maxFilterNodes")
      const tooMany = yield* Effect.flip(decodeQueryRequest({ query: { ...base, where: { ...list, value: [...list.value, "t8"] } } }))
      assert.strictEqual(tooMany._tag === "QueryBudgetExceeded" && tooMany.limit, "maxInValues")
    }).pipe(Effect.provide(QueryLimits.layer({ maxFilterNodes: 8, maxInValues: 8 }))))
})

import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import fc from "fast-check"
import { Filter } from "@cairn/domain/QueryDocument"
import { decodeFilter } from "@cairn/query/FilterDecoder"
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

/** Filter-like JSON: mostly well formed, often not (stray keys, wrong types, unknown operators, empty paths). */
const nodeArb: fc.Arbitrary<unknown> = fc.letrec<{ node: unknown }>((tie) => {
  const op = fc.constantFrom("eq", "ne", "lt", "gte", "startsWith", "contains", "in", "notIn", "isNull", "and", "or", "not", "nope", 3)
  const path = fc.oneof(fc.array(fc.constantFrom("title", "status", "project", "", "x".repeat(65)), { maxLength: 3 }), fc.constant("title"))
  const scalar = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean(), fc.constant(null), fc.constant({}), fc.constant(undefined))
  const value = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }))
  return {
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.record({ op, path, value }, { requiredKeys: ["op"] }),
      fc.record({ op, path }),
      fc.record({ op, filters: fc.array(tie("node"), { maxLength: 3 }) }),
      fc.record({ op, filter: tie("node") }),
      fc.record({ op, path, value, extra: fc.constant(1) }),
      fc.constant(null),
      fc.constant("eq")
    )
  }
}).node

/** Well-formed filters. */
const validArb: fc.Arbitrary<unknown> = fc.letrec<{ node: unknown }>((tie) => {
  const path = fc.array(fc.constantFrom("title", "status", "project"), { minLength: 1, maxLength: 2 })
  const scalar = fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.boolean(), fc.constant(null))
  return {
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.record({ op: fc.constantFrom("eq", "ne", "lt", "lte", "gt", "gte", "startsWith", "contains"), path, value: scalar }),
      fc.record({ op: fc.constantFrom("in", "notIn"), path, value: fc.array(scalar, { maxLength: 3 }) }),
      fc.record({ op: fc.constant("isNull"), path }),
      fc.record({ op: fc.constantFrom("and", "or"), filters: fc.array(tie("node"), { maxLength: 3 }) }),
      fc.record({ op: fc.constant("not"), filter: tie("node") })
    )
  }
}).node

/** A well-formed filter with one place broken, or something filter-like. */
const anyFilterArb = fc.oneof(validArb, validArb, nodeArb, fc.tuple(validArb, nodeArb).map(([valid, broken]) => ({ op: "and", filters: [valid, broken] })))

describe("decodeFilter", () => {
  it("accepts exactly what the strict Filter schema accepts, and answers it unchanged", () => {
    const strict = Schema.decodeUnknownEither(Filter, { onExcessProperty: "error", errors: "all" })
    const run = (raw: unknown) => Effect.runSync(Effect.either(decodeFilter(raw, "/where")).pipe(Effect.provide(QueryLimits.layer())))
    let accepted = 0
    let refused = 0
    fc.assert(
      fc.property(anyFilterArb, (raw) => {
        const expected = strict(raw)
        const actual = run(raw)
        assert.strictEqual(Either.isRight(actual), Either.isRight(expected), JSON.stringify(raw))
        if (Either.isRight(actual) && Either.isRight(expected)) {
          accepted++
          assert.deepStrictEqual(actual.right, expected.right)
        } else refused++
      }),
      { numRuns: 2_000 }
    )
    // Both sides of the property were exercised.
    assert.isAbove(accepted, 500)
    assert.isAbove(refused, 300)
  })
})

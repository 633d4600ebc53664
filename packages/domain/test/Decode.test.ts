// Malformed requests get a bounded report whatever their size: the listed places are
// exactly ArrayFormatter's first ones (checked against it over random requests), at most
// `maxIssues` and a summary, no message echoes a large value, and a huge or deep request
// costs one decode up to its first problem. Sizes and counts are asserted, never time.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, ParseResult, Schema } from "effect"
import fc from "fast-check"
import { decodeDescribeRequest, decodeMutateRequest, summarizeIssues } from "@cairn/domain/RequestDecoders"
import { DescribeRequest } from "@cairn/domain/Describe"
import { isSummaryIssue, issuesOf, maxIssues, omittedCount } from "@cairn/domain/Decode"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"

const body = (error: PublicError) => JSON.stringify(toPublicBody(error))

const timed = <A, E>(label: string, effect: Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const start = performance.now()
    const a = yield* effect
    console.log(`${label}: ${(performance.now() - start).toFixed(1)} ms`)
    return a
  })

/** A message with its `actual …` values dropped: Cairn describes the value instead of echoing it (Redaction.standIn). */
const withoutActual = (message: string) => message.replace(/actual (?:(?! or Expected ).)*/g, "actual …")

/** Every place ArrayFormatter lists for a full (`errors: "all"`) decode, as issues (values not compared). */
const formatterIssues = (schema: Schema.Schema<any, any>, input: unknown) => {
  const result = Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "all" })(input)
  if (Either.isRight(result)) return undefined
  return {
    error: result.left,
    all: ParseResult.ArrayFormatter.formatErrorSync(result.left).map((i) => ({
      path: (i.path.length === 0 ? "" : "/" + i.path.map(String).join("/")) || "/",
      message: withoutActual(i.message)
    }))
  }
}

const assertBounded = (error: PublicError) => {
  const issues = "issues" in error ? error.issues ?? [] : []
  assert.isAtMost(issues.length, maxIssues + 1)
  assert.isBelow(error.message.length, 4_096)
  assert.isBelow(body(error).length, 8_192)
  for (const issue of issues) {
    assert.isAtMost(issue.message.length, 200)
    assert.isAtMost(issue.path.length, 200)
  }
  return issues
}

describe("issuesOf", () => {
  it("lists ArrayFormatter's first places, then counts exactly the rest", () => {
    // Objects whose "toString"/"valueOf" is not a function make Effect's union decoder throw
    // (see the decodeStrict test below); the oracle cannot format them, so they are left out here.
    const plain = fc.jsonValue({ maxDepth: 1 }).filter((v) => typeof v !== "object" || v === null || !("toString" in Object(v) && Object.prototype.hasOwnProperty.call(v, "toString")) && !Object.prototype.hasOwnProperty.call(v, "valueOf"))
    const kind = fc.oneof(fc.constantFrom("entity", "trait", "operation"), plain)
    const request = fc.record(
      {
        browse: fc.oneof(fc.record({ kinds: fc.array(kind, { maxLength: 40 }) }), fc.jsonValue({ maxDepth: 1 })),
        search: fc.oneof(fc.string({ maxLength: 220 }), fc.integer()),
        inspect: fc.array(fc.record({ kind, name: fc.oneof(fc.string({ maxLength: 8 }), fc.integer()) }, { requiredKeys: [] }), { maxLength: 12 }),
        page: fc.record({ limit: fc.oneof(fc.integer(), fc.string({ maxLength: 3 })) }, { requiredKeys: [] }),
        extra: fc.jsonValue({ maxDepth: 1 })
      },
      { requiredKeys: [] }
    )
    let many = 0
    fc.assert(
      fc.property(request, (input) => {
        const expected = formatterIssues(DescribeRequest, input)
        if (expected === undefined) return
        const issues = issuesOf(expected.error)
        const listed = issues.filter((i) => !isSummaryIssue(i))
        assert.deepStrictEqual(listed.map((i) => i.path), expected.all.slice(0, maxIssues).map((i) => i.path))
        for (const [n, issue] of listed.entries()) {
          const original = expected.all[n]!.message
          // Short messages are untouched; long ones are cut or describe the value instead.
          if (original.length <= 60) assert.strictEqual(withoutActual(issue.message), original)
          else assert.isAtMost(issue.message.length, 200)
        }
        if (expected.all.length > maxIssues) {
          many++
          assert.strictEqual(issues.length, maxIssues + 1)
          assert.strictEqual(omittedCount(issues[maxIssues]!), expected.all.length - maxIssues)
        } else assert.strictEqual(issues.length, expected.all.length)
      }),
      { numRuns: 500 }
    )
    assert.isAbove(many, 20)
  })
})

describe("decodeStrict", () => {
  it.effect("an object with a non-function toString where a discriminator belongs is the caller's error, not a defect", () =>
    Effect.gen(function* () {
      for (const kind of [{ toString: 0 }, { valueOf: 1, toString: null }]) {
        const error = yield* Effect.flip(decodeDescribeRequest({ inspect: [{ kind, name: "Task" }] }))
        assert.strictEqual(error.code, "invalid_query")
        assert.isAtMost(error.message.length, 400)
      }
    }))

  it.effect("a describe request with 520,000 invalid kinds is reported by its first problem, briefly", () =>
    Effect.gen(function* () {
      const kinds = Array.from({ length: 520_000 }, (_, i) => i)
      const error = yield* timed("describe with 520,000 invalid kinds", Effect.flip(decodeDescribeRequest({ browse: { kinds } })))
      assert.strictEqual(error.code, "invalid_query")
      const issues = assertBounded(error)
      assert.strictEqual(issues[0]!.path, "/browse/kinds/0")
      assert.isTrue(isSummaryIssue(issues[issues.length - 1]!))
      assert.include(error.message, "other problems may follow")
    }))

  it.effect("a small request lists at most 20 places and counts the rest, in the issues and the message", () =>
    Effect.gen(function* () {
      // 300 invalid kinds: three failed alternatives each, plus the absent `browse` alternative.
      const kinds = Array.from({ length: 300 }, (_, i) => i)
      const error = yield* Effect.flip(decodeDescribeRequest({ browse: { kinds } }))
      const issues = assertBounded(error)
      assert.strictEqual(issues.length, maxIssues + 1)
      assert.deepStrictEqual(issues[maxIssues], { path: "/", message: "and 881 more problems not listed" })
      assert.deepStrictEqual(issues[0], { path: "/browse/kinds/0", message: `Expected "entity", actual a number` })
      // Five listed, then the fifteen other listed ones and the 881 unlisted.
      assert.include(error.message, "; and 896 more.")
      assert.strictEqual(summarizeIssues(issues, 20), summarizeIssues(issues.slice(0, 20), 20) + "; and 881 more")
    }))

  it.effect("a long string or a 10,000-deep value is described, never echoed, and does not overflow", () =>
    Effect.gen(function* () {
      const long = yield* Effect.flip(decodeDescribeRequest({ search: "x".repeat(1_000_000) }))
      assertBounded(long)
      assert.include(long.message, "a string of 1000000 characters")
      let deep: unknown = "end"
      for (let i = 0; i < 10_000; i++) deep = [deep]
      const nested = yield* Effect.flip(decodeDescribeRequest({ inspect: deep }))
      assert.strictEqual(nested.code, "invalid_query")
      assertBounded(nested)
      const input = yield* Effect.flip(decodeMutateRequest({ operation: deep, input: {}, invocationId: "x" }))
      assert.strictEqual(input.code, "invalid_input")
      assertBounded(input)
    }))

  it.effect("small requests read as before", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(decodeDescribeRequest({ browse: { kinds: ["entity", "table"] }, extra: 1 }))
      assert.deepStrictEqual(
        "issues" in error ? error.issues?.map((i) => ({ ...i, message: withoutActual(i.message) })) : undefined,
        formatterIssues(DescribeRequest, { browse: { kinds: ["entity", "table"] }, extra: 1 })!.all
      )
      const ok = yield* decodeDescribeRequest({ browse: { kinds: ["entity"] } })
      assert.deepStrictEqual(ok, { browse: { kinds: ["entity"] } })
    }))
})

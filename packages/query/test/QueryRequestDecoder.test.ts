// The query decoder's report stays bounded whatever the request: a query with 40,000
// malformed select entries (which once took the event loop for over a minute to
// format) and a small one with many mistakes both answer with at most 20 places and a
// summary. Sizes and counts are asserted, never time.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { isSummaryIssue, maxIssues, toPublicBody } from "@cairn/domain"
import { decodeQueryRequest } from "@cairn/query"

const malformedSelect = (n: number) => {
  const select: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) select[`f${i}`] = { path: 1 }
  return { query: { version: 1, from: { kind: "entity", name: "Task" }, select } }
}

const bounded = (error: { readonly message: string; readonly issues?: ReadonlyArray<{ readonly path: string; readonly message: string }> | undefined }) => {
  const issues = error.issues ?? []
  assert.isAtMost(issues.length, maxIssues + 1)
  assert.isBelow(error.message.length, 4_096)
  return issues
}

describe("decodeQueryRequest", () => {
  it.effect("40,000 malformed select entries are reported by the first, briefly", () =>
    Effect.gen(function* () {
      const request = malformedSelect(40_000)
      const start = performance.now()
      const error = yield* Effect.flip(decodeQueryRequest(request))
      console.log(`query with 40,000 malformed select entries: ${(performance.now() - start).toFixed(1)} ms`)
      assert.strictEqual(error._tag, "InvalidQuery")
      if (error._tag !== "InvalidQuery") return
      const issues = bounded(error)
      assert.strictEqual(issues[0]!.path, "/query/select/f0/path")
      assert.isTrue(isSummaryIssue(issues[issues.length - 1]!))
      assert.isBelow(JSON.stringify(toPublicBody(error)).length, 4_096)
    }))

  it.effect("a small query with many mistakes lists 20 places, then counts the rest", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(decodeQueryRequest(malformedSelect(100)))
      assert.strictEqual(error._tag, "InvalidQuery")
      if (error._tag !== "InvalidQuery") return
      const issues = bounded(error)
      assert.deepStrictEqual(
        issues.slice(0, maxIssues).map((i) => i.path),
        Array.from({ length: maxIssues }, (_, i) => `/query/select/f${i}/path`)
      )
      assert.deepStrictEqual(issues[maxIssues], { path: "/", message: "and 80 more problems not listed" })
      // Three listed in the message, then the other 17 listed and the 80 unlisted.
      assert.match(error.message, /^The query request is malformed: \/query\/select\/f0\/path: .*; and 97 more\.$/)
    }))

  it.effect("alternatives at one path are still merged, and the summaries above them dropped", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        decodeQueryRequest({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, order: [{ path: ["id"], direction: "up" }] } })
      )
      assert.strictEqual(error._tag, "InvalidQuery")
      if (error._tag !== "InvalidQuery") return
      assert.deepStrictEqual(error.issues, [
        { path: "/query/order/0/direction", message: `Expected "asc", actual "up" or Expected "desc", actual "up"` }
      ])
    }))
})

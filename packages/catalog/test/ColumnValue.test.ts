import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Comparable, leafIssue, leafProblems } from "../src/ColumnValue.js"

const title: Comparable = { column: "text", operators: ["eq", "ne", "in", "startsWith", "contains"] }
const seats: Comparable = { column: "integer", operators: ["eq", "lt", "in", "isNull"] }
const status: Comparable = { column: "text", literals: ["open", "done"], operators: ["eq", "in"] }

const issuesOf = (field: Comparable, leaf: Parameters<typeof leafIssue>[1]) =>
  leafProblems(field, leaf).map((problem) => leafIssue(field, leaf, problem, "/where"))

describe("leafIssue", () => {
  it("words each mistake once, naming the field by the leaf's own path", () => {
    assert.deepStrictEqual(issuesOf(title, { op: "lt", path: ["title"], value: "a" }), [
      { path: "/where/op", message: `"lt" cannot be applied to ["title"]; its operators are eq, ne, in, startsWith, contains.` }
    ])
    assert.deepStrictEqual(issuesOf(seats, { op: "eq", path: ["seats"], value: null }), [
      { path: "/where/value", message: `null is not a value to compare with; use {"op": "isNull", "path": ["seats"]} instead.` }
    ])
    assert.deepStrictEqual(issuesOf(title, { op: "startsWith", path: ["title"], value: 3 }), [{ path: "/where/value", message: `"startsWith" takes a string.` }])
    assert.deepStrictEqual(issuesOf(seats, { op: "in", path: ["seats"], value: [1, 1.5, 2] }), [
      { path: "/where/value/1", message: "a number is not a valid value for [\"seats\"], which takes an integer." }
    ])
    assert.deepStrictEqual(issuesOf(status, { op: "eq", path: ["status"], value: "gone" }), [
      { path: "/where/value", message: `a string of 4 characters is not a valid value for ["status"], which takes one of "open", "done".` }
    ])
  })

  it("describes a long value rather than echoing it", () =>
    fc.assert(
      fc.property(fc.string({ minLength: 200, maxLength: 400 }), (long) => {
        const [issue] = issuesOf(seats, { op: "eq", path: ["seats"], value: long })
        assert.isDefined(issue)
        assert.notInclude(issue!.message, long)
      })
    ))
})

// The public error union is stated once: its codes and its guard are read from it.
import { assert, describe, it } from "@effect/vitest"
import { Overloaded } from "@cairn/domain/Overloaded"
import {
  CatalogChanged,
  Inaccessible,
  InvalidInput,
  InvalidQuery,
  InvocationConflict,
  isPublicError,
  OperationRejected,
  PublicError,
  PublicErrorCodes,
  QueryBudgetExceeded,
  UnknownDefinition
} from "@cairn/domain/PublicError"

const one = [
  new InvalidQuery({ message: "m" }),
  new UnknownDefinition({ message: "m" }),
  new InvalidInput({ message: "m" }),
  new Inaccessible({ message: "m" }),
  new CatalogChanged({ message: "m", catalogToken: "t" }),
  new QueryBudgetExceeded({ message: "m", limit: "maxPageSize" }),
  new OperationRejected({ message: "m" }),
  new InvocationConflict({ message: "m" })
]

describe("PublicError", () => {
  it("lists the eight codes in the union's order, one per member", () => {
    assert.strictEqual(PublicError.members.length, 8)
    assert.deepStrictEqual(PublicErrorCodes, one.map((e) => e.code))
    assert.deepStrictEqual(PublicErrorCodes, [
      "invalid_query",
      "unknown_definition",
      "invalid_input",
      "inaccessible",
      "catalog_changed",
      "query_budget_exceeded",
      "operation_rejected",
      "invocation_conflict"
    ])
  })

  it("isPublicError takes every member and nothing else", () => {
    for (const error of one) assert.isTrue(isPublicError(error), error._tag)
    for (const other of [new Overloaded({ message: "m", retryAfterSeconds: 1 }), new Error("m"), { hops: [], field: {} }, null, "InvalidQuery"]) {
      assert.isFalse(isPublicError(other))
    }
  })
})

// What crosses the hop comes back as it left: every public error and refusal by tag, message and
// fields (with its code and recovery), and the answers of each verb.
import { assert, describe, it } from "@effect/vitest"
import { Overloaded } from "@cairn/domain/Overloaded"
import * as PublicError from "@cairn/domain/PublicError"
import { InsufficientScope, InternalFailure, Unavailable } from "@cairn/domain/Refusal"
import { Schema } from "effect"
import { CallError, DatabaseEntity } from "../src/entity/DatabaseEntity.js"

/** Encoded, through JSON text (as any wire carries it), decoded again. */
const roundTrip = <A, I>(schema: Schema.Schema<A, I>, value: A): A =>
  Schema.decodeUnknownSync(schema)(JSON.parse(JSON.stringify(Schema.encodeSync(schema)(value))))

const receipt = {
  invocationId: "0192f000-0000-7000-8000-000000000001",
  operation: { kind: "operation" as const, owner: { kind: "entity" as const, name: "Project" }, name: "create" },
  outcome: "rejected" as const,
  reason: "no",
  position: "c000001",
  committedAt: "2026-01-01T00:00:00.000Z",
  catalogToken: "v2.x"
}

describe("DatabaseEntity's wire", () => {
  it("is one entity type with the forwarded verbs and the operator's actions", () => {
    assert.strictEqual(DatabaseEntity.type, "CairnDatabase")
    assert.deepStrictEqual([...DatabaseEntity.protocol.requests.keys()].sort(), ["Close", "Mutate", "Query", "Restore", "Snapshot"])
  })

  it("carries every public error and refusal back as itself", () => {
    const errors: ReadonlyArray<CallError> = [
      new PublicError.InvalidQuery({ message: "bad", issues: [{ path: "/query", message: "is missing" }] }),
      new PublicError.UnknownDefinition({ message: "none" }),
      new PublicError.InvalidInput({ message: "bad input", issues: [{ path: "/input/name", message: "Expected string" }] }),
      new PublicError.Inaccessible({ message: "hidden" }),
      new PublicError.CatalogChanged({ message: "changed", catalogToken: "v2.y" }),
      new PublicError.QueryBudgetExceeded({ message: "too much", limit: "rows" }),
      new PublicError.OperationRejected({ message: "no", receipt }),
      new PublicError.InvocationConflict({ message: "reused" }),
      new InsufficientScope({ scope: "cairn:write", message: "needs write" }),
      new Overloaded({ message: "busy", retryAfterSeconds: 1 }),
      new Unavailable({ message: "later" }),
      new InternalFailure({ message: "logged as abc" })
    ]
    for (const error of errors) {
      const back = roundTrip(CallError, error)
      assert.strictEqual(back._tag, error._tag)
      assert.deepStrictEqual({ ...back }, { ...error })
      if (PublicError.isPublicError(error) && PublicError.isPublicError(back)) {
        assert.deepStrictEqual(PublicError.toPublicBody(back), PublicError.toPublicBody(error))
      }
    }
  })
})

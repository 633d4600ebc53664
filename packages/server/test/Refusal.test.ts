// Refusals travel as values: a handler's exit carries one, decoded or as the RPC layer
// encodes it (where a refusal stays the value it is), and nothing else is taken for one.
import { assert, describe, it } from "@effect/vitest"
import { Overloaded } from "@cairn/domain/Overloaded"
import { InvalidQuery } from "@cairn/domain/PublicError"
import { Cause, Effect, Exit, FiberId, Schema } from "effect"
import { InsufficientScope, refusalOfCause, ServedError, Unavailable } from "../src/engine/Refusal.js"

const encodeExit = Schema.encodeSync(Schema.Exit({ success: Schema.Void, failure: ServedError, defect: Schema.Defect }))

describe("refusalOfCause", () => {
  it("finds the refusal a failed exit carries, decoded or encoded, and nothing else", () => {
    const scope = new InsufficientScope({ scope: "cairn:write", message: "needs write" })
    const overloaded = new Overloaded({ message: "full", retryAfterSeconds: 1 })
    assert.strictEqual(refusalOfCause(Cause.fail(scope)), scope)
    assert.strictEqual(refusalOfCause(Cause.sequential(Cause.interrupt(FiberId.none), Cause.fail(overloaded))), overloaded)
    const encoded = encodeExit(Exit.fail(new Unavailable({ message: "later" })))
    assert.strictEqual(encoded._tag, "Failure")
    assert.strictEqual(refusalOfCause(encoded._tag === "Failure" ? encoded.cause : undefined)?._tag, "Unavailable")
    // A public error is the RPC's own answer, encoded as such; a defect or an interruption is no refusal.
    const publicError = encodeExit(Exit.fail(new InvalidQuery({ message: "bad" })))
    assert.isUndefined(refusalOfCause(publicError._tag === "Failure" ? publicError.cause : undefined))
    assert.isUndefined(refusalOfCause(Cause.die(scope)))
    assert.isUndefined(refusalOfCause(Cause.interrupt(FiberId.none)))
  })

  it.effect("a route's handler failing with a refusal keeps it in its exit", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Effect.fail(new Unavailable({ message: "later" })))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.strictEqual(refusalOfCause(exit.cause)?.message, "later")
    })
  )
})

// The one rule numeric settings follow: an integer above zero, refused in one wording.
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { positiveInteger } from "@cairn/domain/PositiveSetting"

/** The refusal's text, or "" when the value was taken. */
const refusal = (read: Either.Either<number, unknown>) => (Either.isLeft(read) ? String(read.left) : "")

const read = (value: string, unit?: string) =>
  Effect.either(positiveInteger("CAIRN_X", unit)).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CAIRN_X", value]]))))

describe("positiveInteger", () => {
  it.effect("takes an integer above zero and refuses zero, negatives and fractions in one wording", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* read("7"), Either.right(7))
      for (const bad of ["0", "-3"]) assert.include(refusal(yield* read(bad)), "CAIRN_X must be a positive integer", bad)
      assert.isTrue(Either.isLeft(yield* read("1.5")))
      assert.include(refusal(yield* read("0", "bytes")), "CAIRN_X must be a positive number of bytes")
    })
  )
})

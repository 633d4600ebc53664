// `encodesAsIs` says a schema encodes what it decoded as is only when it does (then `Mutate` skips the encode).
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import fc from "fast-check"
import { encodesAsIs } from "@cairn/domain/EncodesAsIs"

const Shallow = Schema.Struct({
  id: Schema.String,
  title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(20)),
  status: Schema.Literal("open", "done"),
  priority: Schema.optional(Schema.Int.pipe(Schema.between(1, 5))),
  tags: Schema.optional(Schema.Array(Schema.String)),
  at: Schema.optional(Schema.NumberFromString)
})
const Plain = Schema.Struct({
  id: Schema.String,
  status: Schema.Literal("open", "done"),
  tags: Schema.optional(Schema.Array(Schema.String)),
  priority: Schema.optional(Schema.Union(Schema.Int.pipe(Schema.between(1, 5)), Schema.Literal("none")))
})
const Nested = Schema.Struct({ id: Schema.String, file: Schema.optional(Schema.Struct({ name: Schema.String })) })
const UnionOfStructs = Schema.Struct({ id: Schema.String, shape: Schema.Union(Schema.Struct({ a: Schema.String }), Schema.Struct({ a: Schema.String, b: Schema.Number })) })
const WithIndex = Schema.Struct({ id: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Number }))

/** Mostly well-formed values of a field: the option matters only where everything else parses. */
const field = (...more: Array<fc.Arbitrary<unknown>>) =>
  fc.oneof(fc.string({ maxLength: 25 }), fc.integer({ min: -2, max: 8 }), fc.constantFrom("open", "done", "3", undefined, null), ...more)
const inner = fc.dictionary(fc.constantFrom("name", "a", "b", "extra"), fc.oneof(fc.string({ maxLength: 3 }), fc.integer()))
const inputOf = (required: Record<string, fc.Arbitrary<unknown>>, optional: Record<string, fc.Arbitrary<unknown>>) =>
  fc.oneof(
    fc.record<Record<string, unknown>>({ ...required, ...optional, extra: field() }, { requiredKeys: Object.keys(required) as Array<never> }),
    fc.anything()
  )
const shallowInput = inputOf(
  { id: fc.string(), title: fc.string({ maxLength: 25 }), status: fc.constantFrom("open", "done", "late") },
  { priority: field(), tags: fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }), at: fc.constantFrom("1", "x", 1) }
)
const cases: ReadonlyArray<readonly [Schema.Schema<any, any>, fc.Arbitrary<unknown>]> = [
  [Shallow, shallowInput],
  [Plain, inputOf({ id: fc.string(), status: fc.constantFrom("open", "done", "late") }, { tags: fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }), priority: field() })],
  [Nested, inputOf({ id: fc.string() }, { file: field(inner) })],
  [UnionOfStructs, inputOf({ id: fc.string(), shape: inner }, {})],
  [WithIndex, inputOf({ id: fc.string() }, { n: field(), m: field() })],
  [Schema.String, fc.anything()],
  [Schema.Array(Shallow), fc.array(shallowInput, { maxLength: 2 })]
]

describe("encodesAsIs", () => {
  it("says a schema encodes what it decoded as is only when it does", () => {
    let checked = 0
    for (const [schema, input] of cases) {
      if (!encodesAsIs(schema.ast)) continue
      checked++
      const decode = Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })
      const encode = Schema.encodeUnknownEither(schema)
      fc.assert(fc.property(input, (u) => {
        const decoded = decode(u)
        if (Either.isRight(decoded)) assert.deepStrictEqual(encode(decoded.right), Either.right(decoded.right))
      }), { numRuns: 300 })
    }
    assert.strictEqual(checked, 1)
    assert.isTrue(encodesAsIs(Plain.ast))
    assert.isFalse(encodesAsIs(Shallow.ast), "NumberFromString")
    assert.isFalse(encodesAsIs(Nested.ast))
    assert.isFalse(encodesAsIs(UnionOfStructs.ast))
    assert.isFalse(encodesAsIs(WithIndex.ast))
    assert.isFalse(encodesAsIs(Schema.String.ast), "not a struct")
    assert.isFalse(encodesAsIs(Schema.Struct({ at: Schema.Date }).ast))
    assert.isFalse(encodesAsIs(Schema.Struct({ n: Schema.optionalWith(Schema.Number, { default: () => 1 }) }).ast))
  })
})

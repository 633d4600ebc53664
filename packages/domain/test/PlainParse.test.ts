// `plainParse` answers exactly as the parse it stands in for (values, key order and errors) over
// random inputs, decoding and encoding, and skips the parse only for a struct of plain values.
import { assert, describe, it } from "@effect/vitest"
import { Either, ParseResult, Schema } from "effect"
import fc from "fast-check"
import { plainParse } from "@cairn/domain/PlainParse"

const Plain = Schema.Struct({
  id: Schema.String.pipe(Schema.brand("Id")),
  title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(20)),
  status: Schema.Literal("open", "done"),
  archived: Schema.Boolean,
  note: Schema.Union(Schema.String, Schema.Null),
  priority: Schema.optional(Schema.Int.pipe(Schema.between(1, 5))),
  due: Schema.optional(Schema.Union(Schema.String.pipe(Schema.pattern(/^\d{4}$/)), Schema.Literal(0))),
  maybe: Schema.UndefinedOr(Schema.Number)
})
const Transforming = Schema.Struct({ id: Schema.String, at: Schema.optional(Schema.NumberFromString) })
const Nested = Schema.Struct({ id: Schema.String, file: Schema.optional(Schema.Struct({ name: Schema.String })) })
const Empty = Schema.Struct({})

const value = fc.oneof(fc.string({ maxLength: 25 }), fc.integer({ min: -2, max: 8 }), fc.double(), fc.boolean(), fc.constantFrom("open", "done", "1999", "3", 0, undefined, null))
const inputOf = (keys: ReadonlyArray<string>) =>
  fc.oneof(
    fc.record<Record<string, unknown>>(Object.fromEntries([...keys, "extra"].map((k) => [k, value])), { requiredKeys: [] }),
    fc.anything()
  )
/** Mostly valid inputs of `Plain`: the direct path answers most of them. */
const plainInput = fc.record<Record<string, unknown>>(
  {
    id: fc.string({ maxLength: 3 }),
    title: fc.oneof(fc.string({ minLength: 1, maxLength: 20 }), value),
    status: fc.constantFrom("open", "done", "late"),
    archived: fc.oneof(fc.boolean(), value),
    note: fc.oneof(fc.constant(null), fc.string({ maxLength: 3 })),
    priority: fc.oneof(fc.integer({ min: 0, max: 6 }), fc.double({ min: 1, max: 5 }), value),
    due: fc.oneof(fc.constantFrom("2024", 0, "24"), value),
    maybe: fc.oneof(fc.constant(undefined), fc.double()),
    extra: value
  },
  { requiredKeys: ["id", "title", "status", "archived", "note"] }
)
const cases: ReadonlyArray<readonly [Schema.Schema<any, any>, fc.Arbitrary<unknown>]> = [
  [Plain, inputOf(["id", "title", "status", "archived", "note", "priority", "due", "maybe"])],
  [Plain, plainInput],
  [Transforming, inputOf(["id", "at"])],
  [Nested, inputOf(["id", "file"])],
  [Empty, inputOf(["id"])],
  [Schema.String, fc.anything()]
]

const answer = (result: Either.Either<unknown, ParseResult.ParseError>) =>
  Either.isRight(result)
    ? { value: result.right, keys: typeof result.right === "object" && result.right !== null ? Object.keys(result.right) : [] }
    : { error: ParseResult.TreeFormatter.formatErrorSync(result.left) }

describe("plainParse", () => {
  it("answers as the parse itself (values, key order, errors), decoding and encoding", () => {
    for (const [schema, input] of cases) {
      for (const direction of ["decode", "encode"] as const) {
        const parse = direction === "decode" ? Schema.decodeUnknownEither(schema) : Schema.encodeUnknownEither(schema)
        const parser = plainParse(schema.ast, parse)
        fc.assert(fc.property(input, (u) => assert.deepStrictEqual(answer(parser(u)), answer(parse(u)))), { numRuns: 400 })
      }
    }
  })

  it("skips the parse only for a struct of plain values whose input passes every check", () => {
    let calls = 0
    const counted = (schema: Schema.Schema<any, any>) => {
      const parse = Schema.decodeUnknownEither(schema)
      return plainParse(schema.ast, (u) => {
        calls++
        return parse(u)
      })
    }
    const valid = { id: "a", title: "t", status: "open", archived: false, note: null, maybe: undefined, extra: 1 }
    assert.deepStrictEqual(counted(Plain)(valid), Either.right({ id: "a", title: "t", status: "open", archived: false, note: null, maybe: undefined }))
    assert.strictEqual(calls, 0)
    counted(Plain)({ ...valid, title: "" })
    counted(Plain)({ id: "a", title: "t", status: "open", archived: false, note: null })
    counted(Transforming)({ id: "a" })
    counted(Nested)({ id: "a" })
    counted(Empty)({ id: "a" })
    assert.strictEqual(calls, 5)
  })
})

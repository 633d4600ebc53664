// BoundedJson against JSON.parse as the oracle: random JSON values under random small
// bounds are parsed exactly as JSON.parse parses them when within bounds and refused
// (naming a bound they really exceed) beyond; random edits of JSON text are refused
// exactly when JSON.parse throws. Then the measured attacks: deep nesting, huge arrays,
// objects and strings, lone surrogates, and `__proto__` keys.
import { assert, describe, it } from "@effect/vitest"
import { Either, Option } from "effect"
import fc from "fast-check"
import { BoundedJson } from "@cairn/domain"

type Bound = BoundedJson.JsonRefusalBound

const unbounded: BoundedJson.JsonBounds = {
  maxDepth: 1_000,
  maxArrayLength: Number.MAX_SAFE_INTEGER,
  maxObjectKeys: Number.MAX_SAFE_INTEGER,
  maxStringLength: Number.MAX_SAFE_INTEGER,
  maxNodes: Number.MAX_SAFE_INTEGER
}

/** Every bound `value` exceeds, measured on the value itself rather than on its text. */
const exceeded = (value: unknown, bounds: BoundedJson.JsonBounds): ReadonlySet<Bound> => {
  const out = new Set<Bound>()
  let nodes = 0
  const walk = (x: unknown, depth: number): void => {
    nodes++
    if (typeof x === "string") {
      if (x.length > bounds.maxStringLength) out.add("maxStringLength")
    } else if (typeof x === "object" && x !== null) {
      if (depth + 1 > bounds.maxDepth) out.add("maxDepth")
      if (Array.isArray(x)) {
        if (x.length > bounds.maxArrayLength) out.add("maxArrayLength")
        for (const e of x) walk(e, depth + 1)
      } else {
        const keys = Object.keys(x)
        if (keys.length > bounds.maxObjectKeys) out.add("maxObjectKeys")
        for (const k of keys) {
          if (k.length > bounds.maxStringLength) out.add("maxStringLength")
          if (k === "__proto__") out.add("prototypeKey")
          walk((x as Record<string, unknown>)[k], depth + 1)
        }
      }
    }
  }
  walk(value, 0)
  if (nodes > bounds.maxNodes) out.add("maxNodes")
  return out
}

const refusal = (result: Either.Either<unknown, BoundedJson.JsonRefusal>): BoundedJson.JsonRefusal => {
  assert.isTrue(Either.isLeft(result), "expected a refusal")
  return (result as Either.Left<BoundedJson.JsonRefusal, unknown>).left
}

const refusedFor = (text: string, bound: Bound, bounds = BoundedJson.defaultJsonBounds) => {
  const refused = refusal(BoundedJson.parse(text, bounds))
  assert.strictEqual(refused.bound, bound)
  // Short, and never an echo of the input.
  assert.isBelow(refused.reason.length, 120)
  return refused
}

const timed = <A>(label: string, f: () => A): A => {
  const start = performance.now()
  const a = f()
  console.log(`${label}: ${(performance.now() - start).toFixed(1)} ms`)
  return a
}

// Strings with the characters a JSON scanner gets wrong: quotes, backslashes, controls
// (escaped by JSON.stringify), astral characters and lone surrogates.
const unit = fc.oneof(
  fc.constantFrom("\"", "\\", "\n", "\u0001", "\u007f", "é", "😀", "\ud800", "\udfff", "/", "u"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 })
)
const jsonValue = fc.jsonValue({ maxDepth: 5, stringUnit: unit })
const boundsArb: fc.Arbitrary<BoundedJson.JsonBounds> = fc.record({
  maxDepth: fc.integer({ min: 0, max: 5 }),
  maxArrayLength: fc.integer({ min: 0, max: 6 }),
  maxObjectKeys: fc.integer({ min: 0, max: 6 }),
  maxStringLength: fc.integer({ min: 0, max: 12 }),
  maxNodes: fc.integer({ min: 1, max: 40 })
})
const indent = fc.constantFrom(undefined, 1, "\t", "\r\n ")

describe("BoundedJson.parse", () => {
  it("equals JSON.parse within bounds and refuses, naming an exceeded bound, beyond", () => {
    let within = 0
    let beyond = 0
    fc.assert(
      fc.property(jsonValue, boundsArb, indent, (value, bounds, space) => {
        const text = JSON.stringify(value, null, space)
        const over = exceeded(JSON.parse(text), bounds)
        const result = BoundedJson.parse(text, bounds)
        if (over.size === 0) {
          within++
          assert.isTrue(Either.isRight(result), `refused within bounds: ${Either.isLeft(result) ? result.left.reason : ""}`)
          assert.deepStrictEqual((result as Either.Right<never, unknown>).right, JSON.parse(text))
        } else {
          beyond++
          const refused = refusal(result)
          assert.isTrue(over.has(refused.bound), `refused for ${refused.bound}, exceeded ${[...over].join(", ")}`)
        }
      }),
      { numRuns: 2_000 }
    )
    // Both sides of the property must be exercised, or it proves little.
    assert.isAbove(within, 200)
    assert.isAbove(beyond, 200)
  })

  it("accepts exactly the texts JSON.parse accepts", () => {
    const edit = fc.record({
      at: fc.nat(),
      remove: fc.integer({ min: 0, max: 2 }),
      insert: fc.constantFrom("", "[", "]", "{", "}", "\"", ",", ":", "\\", "\\u", "\\ud800", "0", "-", ".", "e", "+", "1", " ", "\t", "\u000b", "t", "nul", "\u0000", "\n")
    })
    let valid = 0
    fc.assert(
      fc.property(jsonValue, fc.array(edit, { minLength: 1, maxLength: 3 }), (value, edits) => {
        let text = JSON.stringify(value)
        for (const { at, insert, remove } of edits) {
          const i = at % (text.length + 1)
          text = text.slice(0, i) + insert + text.slice(i + remove)
        }
        let expected: { readonly value: unknown } | undefined
        try {
          expected = { value: JSON.parse(text) }
        } catch {
          expected = undefined
        }
        const result = BoundedJson.parse(text, unbounded)
        // Invalid text is refused; a `__proto__` key before the syntax error is found first.
        if (expected === undefined) assert.include(["syntax", "prototypeKey"], refusal(result).bound, JSON.stringify(text))
        else if (exceeded(expected.value, unbounded).has("prototypeKey")) assert.strictEqual(refusal(result).bound, "prototypeKey")
        else {
          valid++
          assert.isTrue(Either.isRight(result), JSON.stringify(text))
          assert.deepStrictEqual((result as Either.Right<never, unknown>).right, expected.value)
        }
      }),
      { numRuns: 3_000 }
    )
    assert.isAbove(valid, 100)
  })

  it("refuses a 10,000-deep array before parsing it, at the depth bound", () => {
    const deep = "[".repeat(10_000) + "]".repeat(10_000)
    const refused = timed("10,000-deep array", () => refusedFor(deep, "maxDepth"))
    assert.include(refused.reason, "64 levels")
    // 64 levels are fine; 65 are not.
    assert.isTrue(Either.isRight(BoundedJson.parse("[".repeat(64) + "]".repeat(64))))
    refusedFor("[".repeat(65) + "]".repeat(65), "maxDepth")
    refusedFor(`{"a":`.repeat(65) + "1" + "}".repeat(65), "maxDepth")
    // Deep and also unterminated: still the depth, found first.
    refusedFor("[".repeat(100_000), "maxDepth")
  })

  it("refuses a 520,000-element array and a 100,000-key object", () => {
    const numbers = "[" + Array.from({ length: 520_000 }, (_, i) => i % 10).join(",") + "]"
    assert.isAbove(numbers.length, 1_000_000)
    timed("520,000-element array", () => refusedFor(numbers, "maxArrayLength"))
    assert.isTrue(Either.isRight(BoundedJson.parse("[" + Array(10_000).fill(0).join(",") + "]")))
    refusedFor("[" + Array(10_001).fill(0).join(",") + "]", "maxArrayLength")

    const keys = "{" + Array.from({ length: 100_000 }, (_, i) => `"k${i}":0`).join(",") + "}"
    timed("100,000-key object", () => refusedFor(keys, "maxObjectKeys"))
    const thousand = "{" + Array.from({ length: 1_000 }, (_, i) => `"k${i}":0`).join(",") + "}"
    assert.isTrue(Either.isRight(BoundedJson.parse(thousand)))

    // Many small containers: each within its bounds, together too many values.
    const wide = "[" + Array(9_000).fill("[1,2,3,4,5,6,7,8,9,10,11,12]").join(",") + "]"
    refusedFor(wide, "maxNodes")
  })

  it("refuses a 10 MB string, as a value or as a key, and takes it with larger bounds", () => {
    const big = "x".repeat(10_000_000)
    timed("10 MB string", () => refusedFor(`"${big}"`, "maxStringLength"))
    refusedFor(`{"${big}":1}`, "maxStringLength")
    const large = { ...BoundedJson.defaultJsonBounds, maxStringLength: 10_000_000 }
    const parsed = timed("10 MB string within bounds", () => BoundedJson.parse(`["${big}"]`, large))
    assert.isTrue(Either.isRight(parsed) && (parsed.right as Array<string>)[0] === big)
    // Length counts characters after unescaping: six source characters of \u0041 are one.
    const escaped = `"${"\\u0041".repeat(8)}"`
    assert.isTrue(Either.isRight(BoundedJson.parse(escaped, { ...unbounded, maxStringLength: 8 })))
    refusedFor(escaped, "maxStringLength", { ...unbounded, maxStringLength: 7 })
  })

  it("accepts lone surrogates, escaped or raw, as JSON.parse does, counting UTF-16 units", () => {
    for (const text of [`"\\ud800"`, `"\\udc00x"`, `"\ud800"`, `["\\udbff\\udfff", "\\ude00\\ud83d"]`, `{"\\ud800":"\udfff"}`]) {
      const result = BoundedJson.parse(text)
      assert.isTrue(Either.isRight(result), text)
      assert.deepStrictEqual((result as Either.Right<never, unknown>).right, JSON.parse(text))
    }
    // An astral character is two units, escaped or not.
    assert.isTrue(Either.isRight(BoundedJson.parse(`"😀"`, { ...unbounded, maxStringLength: 2 })))
    refusedFor(`"😀"`, "maxStringLength", { ...unbounded, maxStringLength: 1 })
    refusedFor(`"\\ud83d\\ude00"`, "maxStringLength", { ...unbounded, maxStringLength: 1 })
    for (const text of [`"\\ud80"`, `"\\u"`, `"\\x"`, `"\u0001"`, `"abc`, `"\\`]) refusedFor(text, "syntax")
  })

  it("refuses a __proto__ key however it is written, and never changes a prototype", () => {
    for (const text of [
      `{"__proto__":{"polluted":true}}`,
      `{"a":[{"__proto__":null}]}`,
      `{"__pro\\u0074o__":{"polluted":true}}`,
      `{"\\u005f\\u005fproto\\u005f\\u005f":1}`
    ]) {
      const refused = refusedFor(text, "prototypeKey")
      assert.notInclude(refused.reason, "polluted")
    }
    assert.isUndefined(({} as Record<string, unknown>)["polluted"])
    // Other keys that look alike are fine.
    for (const text of [`{"__proto_":1}`, `{"constructor":{"prototype":1}}`, `{"__proto__x":1}`, `["__proto__"]`]) {
      assert.isTrue(Either.isRight(BoundedJson.parse(text)), text)
    }
  })

  it("check refuses a string or key with an unpaired surrogate, which UTF-8 storage cannot keep as sent", () => {
    for (const value of ["\ud800", "a\udc00", "\udbffx", "x\ude00\ud83d", ["ok", { k: "\ud800" }], { "\udfff": 1 }, { a: { "b\ud800": [] } }]) {
      const refused = BoundedJson.check(value)
      assert.isTrue(Option.isSome(refused), JSON.stringify(value))
      assert.strictEqual((refused as Option.Some<BoundedJson.JsonRefusal>).value.bound, "loneSurrogate")
    }
    // Paired surrogates (astral characters) and everything else are text as usual.
    for (const value of ["😀", "\ud83d\ude00", "é\u2028\u0000", { "😀": ["\udbff\udfff"] }, ""]) {
      assert.isTrue(Option.isNone(BoundedJson.check(value)), JSON.stringify(value))
    }
  })

  it("refuses text that is not JSON with one fixed sentence", () => {
    for (const text of ["", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "+1", ".5", "1e", "NaN", "undefined", "'a'", "[1] x", "\ufeff[]", "{a:1}", "tru", "nulll"]) {
      assert.strictEqual(refusedFor(text, "syntax").reason, "The request body is not valid JSON.", text)
    }
    for (const text of ["0", "-0.5e+10", "1E-2", " \t\r\n[] ", "true", "null", "\"\"", "{}"]) {
      assert.isTrue(Either.isRight(BoundedJson.parse(text)), text)
    }
  })
})

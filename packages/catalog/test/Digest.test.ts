import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Digest } from "@cairn/catalog"

/** What canonical JSON has always been (intents and tokens digested from it are persisted). */
const reference = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v
  )

const outcome = (f: () => string) => {
  try {
    return { json: f() }
  } catch (error) {
    return { threw: String(error) }
  }
}

describe("Digest", () => {
  // Database file names and sync's public database names are persisted: these are the
  // exact byte layouts they were first written with, and must never change.
  it("labelled digests keep the persisted layouts", () => {
    for (const key of ["acme", "", "ünïcode/\u0000key"]) {
      assert.strictEqual(
        Digest.databaseId(key),
        createHash("sha256").update("cairn/database/v1\u0000").update(key).digest("hex").slice(0, 32)
      )
      assert.strictEqual(
        Digest.labelled("cairn/sync/database/v1", key, "2026-01-01T00:00:00.000Z").base64url.slice(0, 22),
        createHash("sha256").update("cairn/sync/database/v1\u0000").update(key).update("\u0000").update("2026-01-01T00:00:00.000Z").digest("base64url").slice(0, 22)
      )
    }
  })

  it("canonical JSON ignores key order", () => {
    assert.strictEqual(Digest.canonicalJson({ b: 1, a: { d: 2, c: [3, { f: 4, e: 5 }] } }), '{"a":{"c":[3,{"e":5,"f":4}],"d":2},"b":1}')
    assert.strictEqual(Digest.digest({ a: 1, b: 2 }), Digest.digest({ b: 2, a: 1 }))
  })

  it("canonical JSON is byte for byte what it always was, for plain data and anything else", () => {
    const odd: Array<unknown> = [
      { 10: "a", 9: "b", x: 1, "01": 2, [-1]: 3, 4294967295: 4 },
      [undefined, () => 1, Symbol("s"), NaN, -0, Infinity, 1e21, 5e-7],
      { a: undefined, b: () => 1, c: Symbol("s") },
      { toJSON: () => "replaced" },
      { d: new Date(0), s: new String("ab"), n: new Number(1), b: new Boolean(false) },
      Object.assign(Object.create(null), { z: 1, a: [{ y: null, x: "\u2028\ud800" }] }),
      { "__proto__": 1, constructor: 2 },
      JSON.parse('{"__proto__": {"b": 1, "a": 2}}'),
      new Map([[1, 2]]),
      Object.assign([1, 2], { extra: 3 }),
      [, 1],
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${(i * 7919) % 40}`, { [`z${i}`]: i, [`a${i}`]: -i }])),
      undefined,
      "plain",
      null
    ]
    for (const value of odd) assert.deepStrictEqual(outcome(() => Digest.canonicalJson(value)), outcome(() => reference(value)))
    let deep: unknown = { leaf: 1 }
    for (let i = 0; i < 200; i++) deep = i % 2 === 0 ? [deep] : { k: deep }
    assert.strictEqual(Digest.canonicalJson(deep), reference(deep))
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = { again: cyclic }
    assert.deepStrictEqual(outcome(() => Digest.canonicalJson(cyclic)), outcome(() => reference(cyclic)))
    assert.throws(() => Digest.canonicalJson({ n: 1n }))
    fc.assert(
      fc.property(fc.jsonValue(), (value) => Digest.canonicalJson(value) === reference(value)),
      { numRuns: 2000 }
    )
    fc.assert(
      fc.property(
        fc.anything({ withBoxedValues: true, withNullPrototype: true, withObjectString: true, withDate: true, withMap: true, withSet: true, withTypedArray: true, withSparseArray: true }),
        (value) => assert.deepStrictEqual(outcome(() => Digest.canonicalJson(value)), outcome(() => reference(value)))
      ),
      { numRuns: 2000 }
    )
  })
})

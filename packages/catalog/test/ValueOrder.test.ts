import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { ValueOrder } from "@cairn/catalog"

const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0)

describe("ValueOrder", () => {
  it("text orders by UTF-8 bytes, lone surrogates as U+FFFD, as SQLite stores them", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), fc.string({ unit: "binary" }), (a, b) => {
        assert.strictEqual(sign(ValueOrder.compareText(a, b)), sign(Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))))
      }),
      { numRuns: 2000 }
    )
    // UTF-16 code unit order would put U+FF61 after U+1F600; UTF-8 bytes put it before.
    assert.strictEqual(ValueOrder.compareText("\uff61", "\u{1f600}"), -1)
    assert.strictEqual(ValueOrder.compareText("ab", "abc"), -1)
    assert.strictEqual(ValueOrder.compareText("abc", "ab"), 1)
  })

  it("NULL before numbers before text; booleans are 0/1", () => {
    const sorted: ReadonlyArray<ValueOrder.Stored> = [null, -1, 0, 1, 2.5, "", "A", "a", "é"]
    for (const [i, a] of sorted.entries()) {
      for (const [j, b] of sorted.entries()) assert.strictEqual(sign(ValueOrder.compare(a, b)), sign(i - j), `${a} vs ${b}`)
    }
    assert.strictEqual(ValueOrder.toStored(true), 1)
    assert.strictEqual(ValueOrder.toStored(false), 0)
    assert.strictEqual(ValueOrder.toStored(undefined), null)
    assert.strictEqual(ValueOrder.compareKeys([1, "b"], [1, "a"], [false, true]), -1)
  })
})

import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Digest } from "@cairn/catalog"

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
})

// An operator's message to a database's entity is taken only with this deployment's admin signature,
// for the database it names, before it expires; a forwarded caller's key does not pass for it.
import { assert, describe, it } from "@effect/vitest"
import { Option, Redacted } from "effect"
import { adminKey, sign, validityMillis, verify } from "../src/entity/AdminCall.js"
import { callKey } from "../src/entity/SignedCall.js"

const secret = Redacted.make("online-admin-test-secret-0123456789abcdef")
const key = adminKey(secret)
const now = 1_800_000_000_000
const action = { kind: "restore", to: { position: 12 } }

describe("AdminCall", () => {
  it("verifies what this deployment signed for this database, and only that", () => {
    const call = sign(key, "db1", action, now)
    assert.deepStrictEqual(verify(key, call, "db1", now), Option.some(action))
    // Another database's entity, another deployment's secret, an expired message, a changed action or database: nothing.
    assert.isTrue(Option.isNone(verify(key, call, "db2", now)))
    assert.isTrue(Option.isNone(verify(adminKey(Redacted.make("another-deployment-secret-0123456789abcdef")), call, "db1", now)))
    assert.isTrue(Option.isNone(verify(key, call, "db1", now + validityMillis + 1)))
    assert.isTrue(Option.isNone(verify(key, { ...call, action: JSON.stringify({ kind: "restore", to: { position: 1 } }) }, "db1", now)))
    assert.isTrue(Option.isNone(verify(key, { ...call, databaseId: "db2" }, "db2", now)))
    assert.isTrue(Option.isNone(verify(key, { ...call, expiresAt: call.expiresAt + 60_000 }, "db1", now)))
  })

  it("a forwarded call's key is not the operator's", () => {
    const forged = sign(callKey(secret) as unknown as typeof key, "db1", action, now)
    assert.isTrue(Option.isNone(verify(key, forged, "db1", now)))
  })
})

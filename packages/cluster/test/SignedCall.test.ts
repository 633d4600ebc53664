// A forwarded call opens on the runner only as this deployment signed it: the same principal and
// request, within its validity; anything else (another secret, a changed text, an old call) is refused.
import { assert, describe, it } from "@effect/vitest"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { Option, Redacted } from "effect"
import { callKey, sign, validityMillis, verify } from "../src/entity/SignedCall.js"

const key = callKey(Redacted.make("a-deployment-secret-0123456789abcdef"))
const principal = new Principal({
  subject: "alice",
  roles: ["admin"],
  claims: { org: "acme", nested: { list: [1, 2.5, "x"], flag: true } },
  scopes: ["cairn:read", "cairn:write"],
  databaseKey: DatabaseKey.make("\u0000tenants\u0000acme")
})
const payload = { operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" }, input: { name: "Apollo", __proto__x: 1 }, invocationId: "0192f000-0000-7000-8000-000000000001" }
const now = 1_800_000_000_000

describe("SignedCall", () => {
  it("opens as the principal and request that were signed", () => {
    const opened = verify(key, sign(key, principal, payload, now), now + 1000)
    assert.isTrue(Option.isSome(opened))
    if (Option.isNone(opened)) return
    assert.deepStrictEqual(opened.value.payload, payload)
    assert.strictEqual(opened.value.principal.subject, "alice")
    assert.strictEqual(opened.value.principal.databaseKey, principal.databaseKey)
    assert.deepStrictEqual(opened.value.principal.claims, principal.claims)
    assert.isTrue(opened.value.principal.hasRole("admin"))
  })

  it("refuses another deployment's key, a changed principal or request, and an expired call", () => {
    const call = sign(key, principal, payload, now)
    assert.isTrue(Option.isNone(verify(callKey(Redacted.make("another-secret-0123456789abcdefghijk")), call, now)))
    assert.isTrue(Option.isNone(verify(key, { ...call, principal: call.principal.replace("acme", "evil") }, now)))
    assert.isTrue(Option.isNone(verify(key, { ...call, payload: call.payload.replace("Apollo", "Hermes") }, now)))
    assert.isTrue(Option.isNone(verify(key, { ...call, expiresAt: call.expiresAt + 1 }, now)))
    assert.isTrue(Option.isNone(verify(key, call, now + validityMillis + 1)))
    assert.isTrue(Option.isNone(verify(key, { ...call, signature: "" }, now)))
  })
})

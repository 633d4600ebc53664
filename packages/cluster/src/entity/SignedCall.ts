/**
 * A forwarded call is signed by the process that verified its caller. The runners' socket
 * takes calls from any process that reaches it; without a signature, anyone on that network
 * could name any principal (and so any database). Every process shares the deployment secret
 * (`CAIRN_SECRET`, required in cluster roles), so the front signs the exact text of the
 * principal and the request (HMAC-SHA256 under a key derived for this use only) and the runner
 * checks it before decoding anything. A signature is good for a few minutes: a captured call
 * replays as itself at most (and a mutation replays its receipt).
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import { type Principal } from "@cairn/domain/Principal"
import { PrincipalWire } from "@cairn/domain/PrincipalWire"
import { Option, Redacted, Schema } from "effect"

/** How long a signed call is accepted after it was signed (clock skew between machines included). */
export const validityMillis = 5 * 60_000

/** The call as it travels: texts as signed, their signature, and until when it holds. */
export const SignedCall = Schema.Struct({
  principal: Schema.String,
  payload: Schema.String,
  expiresAt: Schema.Number,
  signature: Schema.String
})
export type SignedCall = typeof SignedCall.Type

/** The signing key of forwarded calls, derived from the deployment secret (never the secret itself). */
export type CallKey = Redacted.Redacted<Buffer>

export const callKey = (secret: Redacted.Redacted<string>): CallKey =>
  Redacted.make(createHmac("sha256", Redacted.value(secret)).update("cairn/cluster/forwarded-call/v1").digest())

const signatureOf = (key: CallKey, principal: string, payload: string, expiresAt: number) =>
  createHmac("sha256", Redacted.value(key)).update(`${expiresAt}\u0000${principal}\u0000`).update(payload).digest("base64url")

const encodePrincipal = Schema.encodeSync(Schema.parseJson(PrincipalWire))
const decodePrincipal = Schema.decodeUnknownOption(Schema.parseJson(PrincipalWire))

/** Signs a call for `principal` (verified here) with the request as it arrived (already within the JSON bounds). */
export const sign = (key: CallKey, principal: Principal, payload: unknown, now: number): SignedCall => {
  const principalText = encodePrincipal(principal)
  const payloadText = JSON.stringify(payload) ?? "null"
  const expiresAt = now + validityMillis
  return { principal: principalText, payload: payloadText, expiresAt, signature: signatureOf(key, principalText, payloadText, expiresAt) }
}

/** The principal and request of a call this deployment signed and that still holds; none otherwise. */
export const verify = (key: CallKey, call: SignedCall, now: number): Option.Option<{ readonly principal: Principal; readonly payload: unknown }> => {
  if (now > call.expiresAt) return Option.none()
  const expected = Buffer.from(signatureOf(key, call.principal, call.payload, call.expiresAt))
  const given = Buffer.from(call.signature)
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return Option.none()
  return Option.flatMap(decodePrincipal(call.principal), (principal) => {
    try {
      return Option.some({ principal, payload: JSON.parse(call.payload) as unknown })
    } catch {
      return Option.none()
    }
  })
}

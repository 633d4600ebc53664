/**
 * A forwarded call is signed by the process that verified its caller. The runners' socket
 * takes calls from any process that reaches it; without a signature, anyone on that network
 * could name any principal (and so any database). Every process shares the deployment secret
 * (`CAIRN_SECRET`, required in cluster roles), so the front signs the exact text of the
 * principal and the request (HMAC-SHA256 under a key derived for this use only) and the runner
 * checks it before decoding anything. A signature is good for a few minutes: a captured call
 * replays as itself at most (and a mutation replays its receipt).
 */
import { type Principal } from "@cairn/domain/Principal"
import { PrincipalWire } from "@cairn/domain/PrincipalWire"
import { Option, type Redacted, Schema } from "effect"
import { deriveKey, holds, signatureOf, type SigningKey, validityMillis } from "../internal/signing.js"

export { validityMillis }

/** The call as it travels: texts as signed, their signature, and until when it holds. */
export const SignedCall = Schema.Struct({
  principal: Schema.String,
  payload: Schema.String,
  expiresAt: Schema.Number,
  signature: Schema.String
})
export type SignedCall = typeof SignedCall.Type

/** The signing key of forwarded calls, derived from the deployment secret (never the secret itself). */
export type CallKey = SigningKey

export const callKey = (secret: Redacted.Redacted<string>): CallKey => deriveKey(secret, "cairn/cluster/forwarded-call/v1")

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
  if (!holds(key, call.principal, call.payload, call.expiresAt, call.signature, now)) return Option.none()
  return Option.flatMap(decodePrincipal(call.principal), (principal) => {
    try {
      return Option.some({ principal, payload: JSON.parse(call.payload) as unknown })
    } catch {
      return Option.none()
    }
  })
}

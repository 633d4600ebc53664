/**
 * What forwarded calls and operators' messages share: a key derived from the deployment secret for one
 * use only (never the secret itself), an HMAC-SHA256 over `expiry, subject, text`, and a check in
 * constant time that also refuses an expired signature. Each kind of message binds its own subject
 * (the principal's text, a database id) and its own key, so one kind never passes for another.
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import { Redacted } from "effect"

/** How long a signed message is accepted after it was signed (clock skew between machines included). */
export const validityMillis = 5 * 60_000

export type SigningKey = Redacted.Redacted<Buffer>

/** The key of `purpose` (e.g. `cairn/cluster/forwarded-call/v1`), derived from the deployment secret. */
export const deriveKey = (secret: Redacted.Redacted<string>, purpose: string): SigningKey =>
  Redacted.make(createHmac("sha256", Redacted.value(secret)).update(purpose).digest())

/** The signature of `text` about `subject`, good until `expiresAt`. */
export const signatureOf = (key: SigningKey, subject: string, text: string, expiresAt: number): string =>
  createHmac("sha256", Redacted.value(key)).update(`${expiresAt}\u0000${subject}\u0000`).update(text).digest("base64url")

/** Whether `signature` is this key's for `text` about `subject`, and still holds at `now`. */
export const holds = (key: SigningKey, subject: string, text: string, expiresAt: number, signature: string, now: number): boolean => {
  if (now > expiresAt) return false
  const expected = Buffer.from(signatureOf(key, subject, text, expiresAt))
  const given = Buffer.from(signature)
  return expected.length === given.length && timingSafeEqual(expected, given)
}

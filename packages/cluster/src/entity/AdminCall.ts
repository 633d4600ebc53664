/**
 * An operator's message to one database's entity (`cairn restore`, `cairn move`), signed with a key
 * derived from the deployment secret for this use only: a forwarded caller's signature can never pass
 * for an operator's, and anyone who reaches the runners' socket without the secret can do nothing.
 * The signature covers the action, the database id it is for and its expiry; a captured message
 * replays as itself for a few minutes at most (a restore to the same target, a second close).
 */
import { Option, type Redacted, Schema } from "effect"
import { deriveKey, holds, signatureOf, type SigningKey, validityMillis } from "../internal/signing.js"

export { validityMillis }

export const AdminCall = Schema.Struct({
  databaseId: Schema.String,
  /** The action as JSON text, exactly as signed. */
  action: Schema.String,
  expiresAt: Schema.Number,
  signature: Schema.String
})
export type AdminCall = typeof AdminCall.Type

/** The signing key of operators' messages, derived from the deployment secret (never the secret itself). */
export type AdminKey = SigningKey

export const adminKey = (secret: Redacted.Redacted<string>): AdminKey => deriveKey(secret, "cairn/cluster/admin-call/v1")

/** Signs `action` for database `databaseId`. */
export const sign = (key: AdminKey, databaseId: string, action: unknown, now: number): AdminCall => {
  const text = JSON.stringify(action) ?? "null"
  const expiresAt = now + validityMillis
  return { databaseId, action: text, expiresAt, signature: signatureOf(key, databaseId, text, expiresAt) }
}

/** The action of a message this deployment signed for `databaseId` and that still holds; none otherwise. */
export const verify = (key: AdminKey, call: AdminCall, databaseId: string, now: number): Option.Option<unknown> => {
  if (call.databaseId !== databaseId || !holds(key, call.databaseId, call.action, call.expiresAt, call.signature, now)) return Option.none()
  try {
    return Option.some(JSON.parse(call.action) as unknown)
  } catch {
    return Option.none()
  }
}

/** Invocation ids name one mutation intent: time-ordered UUIDv7, generated once per intent and reused on retry. */
import { uuidV7 } from "@cairn/domain/Uuid"

/** A new invocation id (pooled randomness: a fraction of a microsecond each, also in a browser). */
export const newInvocationId = (): string => uuidV7()

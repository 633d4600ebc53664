/** Invocation ids name one mutation intent: time-ordered UUIDv7, generated once per intent and reused on retry. */
import { v7 } from "uuid"

export const newInvocationId = (): string => v7()

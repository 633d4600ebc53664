/**
 * The opaque correlation id of the request being served. The front assigns one to
 * every request (never taken from the caller, so it is safe to log) and returns it in
 * `x-request-id`, in every error body and on every log line of the request.
 */
import { randomBytes } from "node:crypto"
import { Context, Effect, Option } from "effect"

export const requestIdHeader = "x-request-id"

/**
 * The request's id, and what the engine learns about it for the request's one log line: a
 * mutation's invocation id (the caller's opaque UUID) and its outcome (receipt outcome or
 * public error code). Never payload values.
 */
export interface CorrelationShape {
  readonly id: string
  invocationId?: string
  outcome?: string
}

/** Random bytes drawn in bulk (one system call per 512 ids), 12 per id. */
const ID_BYTES = 12
let pool = Buffer.alloc(0)
let offset = 0
const freshId = (): string => {
  if (offset + ID_BYTES > pool.length) {
    pool = randomBytes(ID_BYTES * 512)
    offset = 0
  }
  offset += ID_BYTES
  return pool.toString("base64url", offset - ID_BYTES, offset)
}

export class Correlation extends Context.Tag("@cairn/server/Correlation")<Correlation, CorrelationShape>() {
  /** A fresh id: 96 random bits, URL-safe. */
  static readonly make = (): CorrelationShape => ({ id: freshId() })

  /** Records facts about the current request for its log line (nothing outside a front). */
  static readonly note = (facts: { readonly invocationId?: string; readonly outcome?: string }): Effect.Effect<void> =>
    Effect.map(Effect.serviceOption(Correlation), (c) => {
      if (Option.isSome(c)) Object.assign(c.value, facts)
    })

  /** The current request's id; a fresh one when no front assigned it (a route served on its own). */
  static readonly id: Effect.Effect<string> = Effect.map(Effect.serviceOption(Correlation), (c) =>
    Option.isSome(c) ? c.value.id : Correlation.make().id
  )
}

/**
 * The opaque correlation id of the request being served. The front assigns one to
 * every request (never taken from the caller, so it is safe to log) and returns it in
 * `x-request-id`, in every error body and on every log line of the request.
 */
import { randomBytes } from "node:crypto"
import { Context, Effect, Option } from "effect"

export const requestIdHeader = "x-request-id"

export class Correlation extends Context.Tag("@cairn/server/Correlation")<Correlation, { readonly id: string }>() {
  /** A fresh id: 96 random bits, URL-safe. */
  static readonly make = (): { readonly id: string } => ({ id: randomBytes(12).toString("base64url") })

  /** The current request's id; a fresh one when no front assigned it (a route served on its own). */
  static readonly id: Effect.Effect<string> = Effect.map(Effect.serviceOption(Correlation), (c) =>
    Option.isSome(c) ? c.value.id : Correlation.make().id
  )
}

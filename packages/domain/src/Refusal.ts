/**
 * The engine's refusals outside the eight public codes, as Schemas: they cross process
 * boundaries (a front forwarding a call to the process that runs the database) by tag and
 * message, so the caller is answered exactly as on one process. Transports still answer them
 * in their own layer (HTTP status, an MCP protocol error), never as a tool error.
 */
import { Schema } from "effect"
import { Overloaded } from "./Overloaded.js"

/** The verified token lacks the scope the verb needs (403 + `insufficient_scope`). */
export class InsufficientScope extends Schema.TaggedError<InsufficientScope>()("InsufficientScope", {
  scope: Schema.Literal("cairn:read", "cairn:write"),
  message: Schema.String
}) {}

/**
 * The caller's database cannot be served right now (503 + `Retry-After`, retryable); logged under
 * the request id. `retryAfterSeconds` when the engine knows better than the transport's default.
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  message: Schema.String,
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {}

/** A defect inside the server (500); logged under the request id, which the message names. */
export class InternalFailure extends Schema.TaggedError<InternalFailure>()("InternalFailure", {
  message: Schema.String
}) {}

/** Every refusal, by tag. */
export const Refusal = Schema.Union(InsufficientScope, Overloaded, Unavailable, InternalFailure)
export type Refusal = typeof Refusal.Type

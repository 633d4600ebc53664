/**
 * A retryable overload answer (a full writer queue). Deliberately not one of the eight
 * public codes: transports map it to their own layer (HTTP 503 + Retry-After, an MCP
 * protocol error). Nothing of the refused invocation was applied.
 */
import { Schema } from "effect"

export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", {
  message: Schema.String,
  retryAfterSeconds: Schema.Int
}) {}

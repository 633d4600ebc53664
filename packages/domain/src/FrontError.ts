/**
 * The JSON body of an HTTP-level refusal by the front (before or around the RPC layer):
 * authentication, body size, timeout, overload, unknown route, internal failure. The
 * eight public error codes travel inside RPC responses instead; these never do.
 */
import { Schema } from "effect"

export const FrontErrorCode = Schema.Literal(
  "invalid_request",
  "invalid_token",
  "payload_too_large",
  "timeout",
  "overloaded",
  "not_found",
  "internal_error"
)
export type FrontErrorCode = typeof FrontErrorCode.Type

export const FrontErrorBody = Schema.Struct({
  error: FrontErrorCode,
  message: Schema.String,
  /** The opaque correlation id of the request, also in the `x-request-id` header and the server's log. */
  requestId: Schema.String,
  /** `overloaded`: seconds to wait before retrying (also the `Retry-After` header). */
  retryAfterSeconds: Schema.optional(Schema.Int),
  /** `payload_too_large`: the largest accepted body. */
  limitBytes: Schema.optional(Schema.Int)
}).annotations({ identifier: "FrontErrorBody" })
export type FrontErrorBody = typeof FrontErrorBody.Type

/**
 * The JSON body of an HTTP-level refusal by the front (before or around the RPC layer):
 * authentication and scope, a foreign origin, body size, timeout, overload, an unavailable
 * database, unknown route, a method the path is not served under, too many unfinished
 * resumable uploads, internal failure. The
 * eight public error codes travel inside RPC responses instead; these never do.
 */
import { Schema } from "effect"

export const FrontErrorCode = Schema.Literal(
  "invalid_request",
  "invalid_token",
  "insufficient_scope",
  "forbidden",
  "payload_too_large",
  "timeout",
  "overloaded",
  "unavailable",
  "not_found",
  "method_not_allowed",
  "too_many_uploads",
  "internal_error"
)
export type FrontErrorCode = typeof FrontErrorCode.Type

export const FrontErrorBody = Schema.Struct({
  error: FrontErrorCode,
  message: Schema.String,
  /** OAuth refusals (RFC 6750): the same text as `message`, under the standard name. */
  error_description: Schema.optional(Schema.String),
  /** The opaque correlation id of the request, also in the `x-request-id` header and the server's log. */
  requestId: Schema.String,
  /** `overloaded`: seconds to wait before retrying (also the `Retry-After` header). */
  retryAfterSeconds: Schema.optional(Schema.Int),
  /** `payload_too_large`: the largest accepted body. */
  limitBytes: Schema.optional(Schema.Int)
}).annotations({ identifier: "FrontErrorBody" })
export type FrontErrorBody = typeof FrontErrorBody.Type

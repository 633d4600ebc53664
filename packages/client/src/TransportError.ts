/**
 * Failures of the HTTP transport rather than of the data plane: the front refused the
 * request (token, size, time, overload) or the server failed. Public errors of the data
 * plane stay the eight `@cairn/domain` errors; these are what else a call can fail with.
 */
import { type FrontErrorBody } from "@cairn/domain/FrontError"
import { Overloaded } from "@cairn/domain/Overloaded"
import { Schema } from "effect"

/** The token is missing, malformed, expired or not for this resource (HTTP 401/400). Get a new token. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  message: Schema.String,
  requestId: Schema.optional(Schema.String)
}) {}

/** The request body was larger than the deployment accepts (HTTP 413). Send less per call. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  message: Schema.String,
  limitBytes: Schema.optional(Schema.Int),
  requestId: Schema.optional(Schema.String)
}) {}

/** The request exceeded the deployment's time limit (HTTP 504). A mutation may still commit: repeat it with its invocationId. */
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", {
  message: Schema.String,
  requestId: Schema.optional(Schema.String)
}) {}

/** The server could not be reached or failed inside; `requestId`, when present, is the reference its log holds. */
export class ServerFailure extends Schema.TaggedError<ServerFailure>()("ServerFailure", {
  message: Schema.String,
  status: Schema.optional(Schema.Int),
  requestId: Schema.optional(Schema.String)
}) {}

export type TransportError = Unauthenticated | PayloadTooLarge | RequestTimeout | ServerFailure | Overloaded

export const isTransportError = (u: unknown): u is TransportError =>
  u instanceof Unauthenticated ||
  u instanceof PayloadTooLarge ||
  u instanceof RequestTimeout ||
  u instanceof ServerFailure ||
  u instanceof Overloaded

/** The typed error for a refusal the front answered with `status` and `body` (when it had a JSON body). */
export const fromFrontError = (status: number, body: FrontErrorBody | undefined): TransportError => {
  const requestId = body?.requestId
  const ids = requestId !== undefined ? { requestId } : {}
  const message = body?.message ?? `The server answered HTTP ${status}.`
  switch (body?.error) {
    case "invalid_token":
    case "invalid_request":
      return status === 401 || status === 400 ? new Unauthenticated({ message, ...ids }) : new ServerFailure({ message, status, ...ids })
    case "payload_too_large":
      return new PayloadTooLarge({ message, ...(body.limitBytes !== undefined ? { limitBytes: body.limitBytes } : {}), ...ids })
    case "timeout":
      return new RequestTimeout({ message, ...ids })
    case "overloaded":
      return new Overloaded({ message, retryAfterSeconds: body.retryAfterSeconds ?? 1 })
    default:
      return new ServerFailure({ message, status, ...ids })
  }
}

/**
 * A defect inside the service, answered without revealing anything but an opaque
 * correlation id that operators find in the logs. Not one of the eight public codes:
 * transports map it to their generic failure (HTTP 500, an MCP internal error).
 */
import { Schema } from "effect"

export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  message: Schema.String,
  correlationId: Schema.String
}) {
  static readonly withReference = (correlationId: string) =>
    new InternalError({
      message: `An internal error occurred and nothing was applied. Quote reference ${correlationId} when reporting it.`,
      correlationId
    })
}

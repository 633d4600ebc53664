/**
 * What the engine refuses outside the spec's eight public codes. Each transport answers
 * these in its own standard layer (HTTP status + OAuth challenge, or an MCP protocol
 * error), never as a tool error: a token without the needed scope, a writer that is
 * overloaded, a database that cannot be opened, and a failure inside the server. Their
 * messages are public: they name no internal id, path, SQL or class, only the request id.
 */
import { InternalError } from "@cairn/domain/InternalError"
import { type Overloaded } from "@cairn/domain/Overloaded"
import { PublicError } from "@cairn/domain/PublicError"
import { type InsufficientScope, InternalFailure, type Unavailable } from "@cairn/domain/Refusal"
import { Cause, Data, Effect, Option, Predicate, Schema } from "effect"
import { Correlation } from "./Correlation.js"

/** What a caller whose token lacks `scope` is told, on every way in (data plane, files, resumable uploads). */
export const missingScope = (scope: string) =>
  `This call needs the ${scope} scope, which the access token does not carry. Ask the authorization server for a token with ${scope}.`

/** The refusals are contracts (`@cairn/domain/Refusal`): they cross a process hop by tag. */
export { InsufficientScope, InternalFailure, Unavailable } from "@cairn/domain/Refusal"

export type Refusal = InsufficientScope | Overloaded | Unavailable | InternalFailure

/**
 * A file the operator's limits or the request's own shape refuse (files only): its type or name,
 * its size or the database's quota, too many unfinished resumable uploads, a body cut off before
 * its end, a range outside the file. The route words it in its protocol (`fileHttpStatusOf`).
 */
export class FileRefused extends Data.TaggedError("FileRefused")<{
  readonly reason: "type" | "name" | "size" | "quota" | "unfinished" | "incomplete" | "range"
  readonly message: string
  /** `size` and `quota`: the limit that was reached. */
  readonly limitBytes?: number
  /** `range`: the file's size, for the answer's `Content-Range` (`bytes *` then the size). */
  readonly fileBytes?: number
}> {}

/** How the HTTP layer answers a refused file: status and the front's error code. */
export const fileHttpStatusOf = (
  refused: FileRefused
): { readonly status: 400 | 413 | 415 | 416 | 429; readonly error: "invalid_request" | "payload_too_large" | "too_many_uploads" } => {
  switch (refused.reason) {
    case "type":
      return { status: 415, error: "invalid_request" }
    case "name":
    case "incomplete":
      return { status: 400, error: "invalid_request" }
    case "size":
    case "quota":
      return { status: 413, error: "payload_too_large" }
    case "unfinished":
      return { status: 429, error: "too_many_uploads" }
    case "range":
      return { status: 416, error: "invalid_request" }
  }
}

/** Everything a `DataPlane` verb can answer besides its result. */
export type EngineError = PublicError | Refusal

/** Whether `u` is a refusal, by its tag (a second copy of this package makes its classes differ). */
export const isRefusal = (u: unknown): u is Refusal =>
  Predicate.isTagged(u, "InsufficientScope") || Predicate.isTagged(u, "Overloaded") || Predicate.isTagged(u, "Unavailable") || Predicate.isTagged(u, "InternalFailure")

/**
 * The error channel of an RPC as a route serves it: its public errors, which are the RPC's
 * answer, and the refusals, which the route answers for the whole HTTP request instead (see
 * `DbGate`). A refusal is declared, not encoded: it reaches the route as the value it is, in
 * the handler's exit, and is never sent as an RPC answer.
 */
export const ServedError = Schema.Union(PublicError, Schema.declare(isRefusal, { identifier: "Refusal" }))

/** The refusal a handler's exit carries, if it failed with one (in its encoded form, where the refusal stays as it is). */
export const refusalOfCause = (cause: unknown): Refusal | undefined => {
  if (!Predicate.hasProperty(cause, "_tag")) return undefined
  switch (cause._tag) {
    case "Fail":
      return Predicate.hasProperty(cause, "error") && isRefusal(cause.error) ? cause.error : undefined
    case "Sequential":
    case "Parallel":
      return (Predicate.hasProperty(cause, "left") ? refusalOfCause(cause.left) : undefined) ??
        (Predicate.hasProperty(cause, "right") ? refusalOfCause(cause.right) : undefined)
    default:
      return undefined
  }
}

/** How the HTTP layer answers a refusal: status, the front's error code, extra headers. */
export const httpStatusOf = (refusal: Refusal): { readonly status: number; readonly error: "insufficient_scope" | "overloaded" | "unavailable" | "internal_error" } => {
  switch (refusal._tag) {
    case "InsufficientScope":
      return { status: 403, error: "insufficient_scope" }
    case "Overloaded":
      return { status: 503, error: "overloaded" }
    case "Unavailable":
      return { status: 503, error: "unavailable" }
    case "InternalFailure":
      return { status: 500, error: "internal_error" }
  }
}

/**
 * A defect, answered by reference: the log holds the cause (under the request id), the
 * caller only the request id. `label` names the verb or route for the log line.
 */
export const internalFailure = (label: string, cause: Cause.Cause<unknown>): Effect.Effect<InternalFailure> =>
  Effect.gen(function* () {
    const requestId = yield* Correlation.id
    const known = Option.filter(Cause.dieOption(cause), (d): d is InternalError => d instanceof InternalError)
    // The writer already logged its own defects under the reference its message names.
    if (Option.isSome(known)) return new InternalFailure({ message: known.value.message })
    yield* Effect.logError(`${label} failed inside the server`, cause)
    return new InternalFailure({
      message: `The server failed while handling this request; it was logged as ${requestId}. Retry later, or report that reference.`
    })
  })

/** Failures pass through; defects become `InternalFailure`; interruptions stay interruptions. */
export const scrubDefects =
  (label: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | InternalFailure, R> =>
    Effect.catchAllCause(effect, (cause): Effect.Effect<never, E | InternalFailure> =>
      Option.isSome(Cause.failureOption(cause)) || Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause)
        : Effect.flatMap(internalFailure(label, cause), Effect.fail)
    )

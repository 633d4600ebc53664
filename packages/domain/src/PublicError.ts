/**
 * The eight public error codes of the spec. Every tool error is exactly one of these;
 * each carries a message a caller can act on and the spec's recovery hint. Messages
 * never name internal identifiers, SQL, policy details, or whether hidden things exist.
 */
import { Schema } from "effect"
import { Receipt } from "./Receipt.js"

/** One offending place in a request: a JSON-pointer-like path and what is wrong there. */
export const Issue = Schema.Struct({ path: Schema.String, message: Schema.String })
export type Issue = typeof Issue.Type

const issues = Schema.optional(Schema.Array(Issue))

export class InvalidQuery extends Schema.TaggedError<InvalidQuery>()("InvalidQuery", {
  message: Schema.String,
  issues
}) {
  get code() {
    return "invalid_query" as const
  }
  get recovery() {
    return "Correct the document; do not repeat it unchanged."
  }
}

export class UnknownDefinition extends Schema.TaggedError<UnknownDefinition>()("UnknownDefinition", {
  message: Schema.String
}) {
  get code() {
    return "unknown_definition" as const
  }
  get recovery() {
    return "Rediscover the exact definition with describe."
  }
}

export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  message: Schema.String,
  issues
}) {
  get code() {
    return "invalid_input" as const
  }
  get recovery() {
    return "Correct the input from the schema published by describe."
  }
}

export class Inaccessible extends Schema.TaggedError<Inaccessible>()("Inaccessible", {
  message: Schema.String
}) {
  get code() {
    return "inaccessible" as const
  }
  get recovery() {
    return "Stop, or ask the user for access."
  }
}

export class CatalogChanged extends Schema.TaggedError<CatalogChanged>()("CatalogChanged", {
  message: Schema.String,
  catalogToken: Schema.String
}) {
  get code() {
    return "catalog_changed" as const
  }
  get recovery() {
    return "Call describe and rebuild the request against the current catalog."
  }
}

export class QueryBudgetExceeded extends Schema.TaggedError<QueryBudgetExceeded>()("QueryBudgetExceeded", {
  message: Schema.String,
  limit: Schema.String
}) {
  get code() {
    return "query_budget_exceeded" as const
  }
  get recovery() {
    return "Narrow the selection, path depth, filters or page size."
  }
}

export class OperationRejected extends Schema.TaggedError<OperationRejected>()("OperationRejected", {
  message: Schema.String,
  /** The durable receipt of the rejected intent; replays return the same one. */
  receipt: Schema.optional(Receipt)
}) {
  get code() {
    return "operation_rejected" as const
  }
  get recovery() {
    return "Present the public reason to the user; do not retry blindly."
  }
}

export class InvocationConflict extends Schema.TaggedError<InvocationConflict>()("InvocationConflict", {
  message: Schema.String
}) {
  get code() {
    return "invocation_conflict" as const
  }
  get recovery() {
    return "Fix the caller's state; use a new invocationId only for a new intent."
  }
}

export const PublicError = Schema.Union(
  InvalidQuery,
  UnknownDefinition,
  InvalidInput,
  Inaccessible,
  CatalogChanged,
  QueryBudgetExceeded,
  OperationRejected,
  InvocationConflict
)
export type PublicError = typeof PublicError.Type

export type PublicErrorCode = PublicError["code"]

/** The eight codes, in the union's order: read from its members, never restated. */
export const PublicErrorCodes: ReadonlyArray<PublicErrorCode> = PublicError.members.map((member) => member.prototype.code)

/** The transport-neutral body of a public error: what MCP and HTTP callers see. */
export interface PublicErrorBody {
  readonly code: PublicErrorCode
  readonly message: string
  readonly recovery: string
  readonly issues?: ReadonlyArray<Issue>
  readonly catalogToken?: string
  readonly limit?: string
}

/** Whether `u` is one of the eight public errors (the union's own guard). */
export const isPublicError: (u: unknown) => u is PublicError = Schema.is(PublicError)

export const toPublicBody = (error: PublicError): PublicErrorBody => {
  const body: { -readonly [K in keyof PublicErrorBody]: PublicErrorBody[K] } = {
    code: error.code,
    message: error.message,
    recovery: error.recovery
  }
  if ("issues" in error && error.issues !== undefined) body.issues = error.issues
  if (error._tag === "CatalogChanged") body.catalogToken = error.catalogToken
  if (error._tag === "QueryBudgetExceeded") body.limit = error.limit
  return body
}

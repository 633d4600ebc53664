/** `mutate`: invoke exactly one authorized operation and return its durable receipt. */
import { Schema } from "effect"
import { InvocationIdFromString } from "./Ids.js"
import { OperationRef, Target } from "./References.js"

export const MutateRequest = Schema.Struct({
  ifCatalog: Schema.optional(Schema.String),
  operation: OperationRef,
  target: Schema.optional(Target),
  input: Schema.optional(Schema.Unknown),
  /** Caller-chosen UUIDv7 naming this one intent (any case; decoded lowercased). */
  invocationId: InvocationIdFromString
}).annotations({ identifier: "MutateRequest" })
export type MutateRequest = typeof MutateRequest.Type

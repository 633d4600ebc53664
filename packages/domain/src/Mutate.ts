/** `mutate`: invoke exactly one authorized operation and return its durable receipt. */
import { Schema } from "effect"
import { OperationRef, Target } from "./References.js"

export const MutateRequest = Schema.Struct({
  ifCatalog: Schema.optional(Schema.String),
  operation: OperationRef,
  target: Schema.optional(Target),
  input: Schema.optional(Schema.Unknown),
  /** Caller-chosen UUIDv7 naming this one intent. */
  invocationId: Schema.String
}).annotations({ identifier: "MutateRequest" })
export type MutateRequest = typeof MutateRequest.Type

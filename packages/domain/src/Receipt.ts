/**
 * The durable receipt of one decided mutation intent. It is written in the same
 * transaction as the operation's effects, so an acknowledged receipt is never lost.
 */
import { Schema } from "effect"
import { OperationRef, Target } from "./References.js"

export const Outcome = Schema.Literal("committed", "rejected")
export type Outcome = typeof Outcome.Type

export const Receipt = Schema.Struct({
  invocationId: Schema.String,
  operation: OperationRef,
  target: Schema.optional(Target),
  outcome: Outcome,
  /** The public reason of a rejection. */
  reason: Schema.optional(Schema.String),
  /** The operation's output, as its published output schema encodes it. */
  output: Schema.optional(Schema.Unknown),
  /** Opaque commit position in the database's single commit order. */
  position: Schema.String,
  /** ISO-8601 UTC time of the commit. */
  committedAt: Schema.String,
  catalogToken: Schema.String
}).annotations({ identifier: "Receipt" })
export type Receipt = typeof Receipt.Type

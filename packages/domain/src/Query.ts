/** `query`: one QueryDocumentV1 against the caller's database, with safe continuation. */
import { Schema } from "effect"
import { PositionText } from "./Position.js"
import { QueryDocumentV1 } from "./QueryDocument.js"

export const QueryRequest = Schema.Struct({
  ifCatalog: Schema.optional(Schema.String),
  /**
   * Read your writes: a position from a receipt, a result's basis or a sync checkpoint. The
   * answer is read at that position or later, whichever process serves it.
   */
  atLeast: Schema.optional(PositionText),
  query: QueryDocumentV1
}).annotations({ identifier: "QueryRequest" })
export type QueryRequest = typeof QueryRequest.Type

export const Row = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type Row = typeof Row.Type

/** What a page was read against: continue only while these still hold. */
export const Basis = Schema.Struct({
  catalogToken: Schema.String,
  /** Opaque commit position the page was read at. */
  position: Schema.String
})
export type Basis = typeof Basis.Type

export const QueryResult = Schema.Struct({
  rows: Schema.Array(Row),
  cursor: Schema.optional(Schema.String),
  basis: Basis
}).annotations({ identifier: "QueryResult" })
export type QueryResult = typeof QueryResult.Type

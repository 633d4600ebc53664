/**
 * Answers from a stored receipt: the same intent gets the stored result (a committed
 * receipt, or the stored rejection); another intent under the same id is a conflict.
 */
import { SqlSchema, type SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { InvocationConflict, OperationRejected } from "@cairn/domain/PublicError"
import { Receipt } from "@cairn/domain/Receipt"
import { receiptsTable } from "../Log.js"

export interface StoredReceipt {
  readonly intent: string
  readonly receipt: Receipt
}

export const conflict = () =>
  new InvocationConflict({
    message:
      "This invocationId was already used. Resend an intent only with the invocationId it was first sent with; use a new invocationId for a new intent."
  })

export const answer = (
  stored: StoredReceipt,
  intent: string
): Effect.Effect<Receipt, OperationRejected | InvocationConflict> =>
  stored.intent !== intent
    ? Effect.fail(conflict())
    : stored.receipt.outcome === "rejected"
      ? Effect.fail(new OperationRejected({ message: stored.receipt.reason ?? "The operation was rejected.", receipt: stored.receipt }))
      : Effect.succeed(stored.receipt)

/** A `_cairn_receipts` row as replays read it: the receipt JSON decoded, not cast. */
const StoredRow = Schema.Struct({
  invocation_id: Schema.String,
  intent: Schema.String,
  receipt: Schema.parseJson(Receipt)
})

/** Stored receipts of these invocation ids, in one statement. A row that does not decode is a defect. */
export const load = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>) =>
  SqlSchema.findAll({
    Request: Schema.Array(Schema.String),
    Result: StoredRow,
    execute: (ids) => sql`SELECT invocation_id, intent, receipt FROM ${sql(receiptsTable)} WHERE ${sql.in("invocation_id", ids)}`
  })(ids).pipe(
    Effect.map((rows) => new Map<string, StoredReceipt>(rows.map((r) => [r.invocation_id, { intent: r.intent, receipt: r.receipt }]))),
    Effect.catchTag("ParseError", Effect.die)
  )

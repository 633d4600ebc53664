/**
 * Answers from a stored receipt: the same intent gets the stored result (a committed
 * receipt, or the stored rejection); another intent under the same id is a conflict.
 */
import { Effect } from "effect"
import { InvocationConflict, OperationRejected, type Receipt } from "@cairn/domain"
import type { SqlClient } from "@effect/sql"
import { receiptsTable } from "../Log.js"

export interface StoredReceipt {
  readonly intent: string
  readonly receipt: Receipt
}

export const conflict = () =>
  new InvocationConflict({
    message:
      "This invocationId was already used for a different intent (another operation, target or input). Repeat an intent only with its original invocationId; use a new one for a new intent."
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

/** Stored receipts of these invocation ids, in one statement. */
export const load = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>) =>
  Effect.map(
    sql.unsafe<{ readonly invocation_id: string; readonly intent: string; readonly receipt: string }>(
      `SELECT invocation_id, intent, receipt FROM ${receiptsTable} WHERE invocation_id IN (SELECT value FROM json_each(?))`,
      [JSON.stringify(ids)]
    ),
    (rows) =>
      new Map<string, StoredReceipt>(
        rows.map((r) => [r.invocation_id, { intent: r.intent, receipt: JSON.parse(r.receipt) as Receipt }])
      )
  )

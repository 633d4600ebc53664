/**
 * Answers from a stored receipt: the same intent gets the stored result (a committed
 * receipt, or the stored rejection); another intent under the same id is a conflict.
 */
import { Effect, Exit, Schema } from "effect"
import { InvocationConflict, OperationRejected } from "@cairn/domain/PublicError"
import { Receipt } from "@cairn/domain/Receipt"
import { receiptsTable } from "../Log.js"
import type { Raw } from "./connection.js"

export interface StoredReceipt {
  readonly intent: string
  readonly receipt: Receipt
}

export const conflict = () =>
  new InvocationConflict({
    message:
      "This invocationId was already used. Resend an intent only with the invocationId it was first sent with; use a new invocationId for a new intent."
  })

/**
 * An invocation id minted before the receipts this database retains (see `StoreConfig.receiptRetention`):
 * whether it was decided can no longer be told, so it is not decided again.
 */
export const expired = () =>
  new InvocationConflict({
    message:
      "This invocationId is older than the receipts this database retains, so whether it was already applied can no longer be told; it was not applied now. If this is a retry, check its effect with a query; for a new intent, mint a new invocationId (a UUIDv7 from the current time)."
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

/** The receipt JSON of a stored row, decoded, not cast. */
const decodeReceipt = Schema.decodeUnknownSync(Schema.parseJson(Receipt))

/**
 * The stored receipt of an invocation id, if any, read synchronously on the held write
 * connection. A row that does not decode throws (a defect of the whole group).
 */
export const loadSync = (raw: Raw, id: string): StoredReceipt | undefined => {
  const row = raw.statement(`SELECT intent, receipt FROM ${receiptsTable} WHERE invocation_id = ?`).get(id) as
    | { readonly intent: string; readonly receipt: string }
    | undefined
  return row === undefined ? undefined : { intent: row.intent, receipt: decodeReceipt(row.receipt) }
}

/** `answer` as an exit, for the writer's synchronous group. */
export const answerExit = (stored: StoredReceipt, intent: string): Exit.Exit<Receipt, OperationRejected | InvocationConflict> =>
  stored.intent !== intent
    ? Exit.fail(conflict())
    : stored.receipt.outcome === "rejected"
      ? Exit.fail(new OperationRejected({ message: stored.receipt.reason ?? "The operation was rejected.", receipt: stored.receipt }))
      : Exit.succeed(stored.receipt)

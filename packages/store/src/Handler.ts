/**
 * An operation handler: an Effect over the transactional API that returns the
 * operation's output, or refuses with a public reason (`reject`, stored as a rejected
 * receipt) or as `inaccessible` (nothing stored, e.g. a referenced record is missing).
 */
import { Data, Effect } from "effect"
import { Inaccessible } from "@cairn/domain/PublicError"
import { type Principal } from "@cairn/domain/Principal"
import type { Entities, Tx } from "./Tx.js"

/** A refusal with a reason the caller is shown as is. */
export class Rejection extends Data.TaggedError("Rejection")<{ readonly reason: string }> {}

/** Refuses the intent; the rejection is a durable receipt, so replays refuse identically. */
export const reject = (reason: string): Effect.Effect<never, Rejection> => Effect.fail(new Rejection({ reason }))

/**
 * Answers `inaccessible` (nothing is stored): for records the input refers to that do
 * not exist. The message must read the same whether the record is hidden or absent.
 */
export const inaccessible = (message: string): Effect.Effect<never, Inaccessible> =>
  Effect.fail(new Inaccessible({ message }))

export interface HandlerContext<Input = any, Target = any, Es extends Entities = any> {
  /** The input, decoded with the operation's input schema. */
  readonly input: Input
  /** The target record, decoded, for targeted operations; `undefined` otherwise. */
  readonly target: Target
  readonly tx: Tx<Es>
  readonly principal: Principal
  /** The commit time of the transaction, ISO-8601 UTC. */
  readonly now: string
}

export type Handler<Input = any, Output = any, Target = any, Es extends Entities = any> = (
  context: HandlerContext<Input, Target, Es>
) => Effect.Effect<Output, Rejection | Inaccessible>

export type Any = Handler<any, any, any, any>

/**
 * The authorization hook of the writer: called inside the transaction before the
 * handler, with read access to the data. Required: a deployment provides its policy's
 * guard (`PolicyGuardLive`); there is no default, so a layer graph without one does not build.
 */
import { Context, type Effect } from "effect"
import type { CompiledOperation } from "@cairn/catalog/Catalog"
import type { Inaccessible, OperationRejected } from "@cairn/domain/PublicError"
import type { Principal } from "@cairn/domain/Principal"
import type { TxRead } from "./Tx.js"

export interface MutationCheck {
  readonly principal: Principal
  readonly operation: CompiledOperation
  /** The target record as stored (`Layout.decodeRecord`), for targeted operations. */
  readonly target?: Readonly<Record<string, unknown>>
  /** The decoded input. */
  readonly input: unknown
  readonly tx: TxRead
}

export interface MutationGuardShape {
  /**
   * `Inaccessible`: answered as is, nothing stored (the same as a missing target).
   * `OperationRejected`: stored as a rejected receipt with its message as the reason.
   */
  readonly check: (check: MutationCheck) => Effect.Effect<void, Inaccessible | OperationRejected>
}

export class MutationGuard extends Context.Tag("@cairn/store/MutationGuard")<MutationGuard, MutationGuardShape>() {}

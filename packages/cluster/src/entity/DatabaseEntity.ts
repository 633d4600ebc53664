/**
 * Each database is one cluster entity, keyed by its id (the digest of its key: keys never
 * travel as ids). Its writer runs only where the cluster placed the entity, so one commit
 * order per database holds across processes. The protocol is the part of the engine a front
 * forwards: the verified principal and the request exactly as it arrived, answered with the
 * engine's own answers and errors (public errors and refusals, by tag).
 */
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { PublicError } from "@cairn/domain/PublicError"
import { QueryResult } from "@cairn/domain/Query"
import { Receipt } from "@cairn/domain/Receipt"
import { Refusal } from "@cairn/domain/Refusal"
import { SnapshotPage } from "@cairn/domain/Sync"
import { Schema } from "effect"
import { SignedCall } from "./SignedCall.js"
import { AdminCall } from "./AdminCall.js"

/** The entity type: one per database, its id `databaseId(key)`. */
export const entityType = "CairnDatabase"

/**
 * A forwarded call: who asks (verified by the front) and their request as it arrived (already
 * within the JSON bounds: the front admitted it), as signed texts (`SignedCall`), so the
 * writer's process decodes the very same request and trusts only calls of this deployment.
 */
export const Call = SignedCall
export type Call = SignedCall

/** Everything a forwarded verb answers besides its result: the engine's errors, by tag. */
export const CallError = Schema.Union(PublicError, Refusal)
export type CallError = typeof CallError.Type

export const Mutate = Rpc.make("Mutate", { payload: Call, success: Receipt, error: CallError })
export const Query = Rpc.make("Query", { payload: Call, success: QueryResult, error: CallError })
export const Snapshot = Rpc.make("Snapshot", { payload: Call, success: SnapshotPage, error: CallError })

/**
 * Operators' messages (`cairn restore`, `cairn move`): signed with the deployment's admin key
 * (`AdminCall`), their action as JSON text. A refusal (a bad signature, a target the archive cannot
 * reach) changed nothing; `AdminUnavailable` is retryable (the archive could not be reached).
 */
export class AdminRefused extends Schema.TaggedError<AdminRefused>()("AdminRefused", { message: Schema.String }) {}
export class AdminUnavailable extends Schema.TaggedError<AdminUnavailable>()("AdminUnavailable", { message: Schema.String }) {}
export const AdminError = Schema.Union(AdminRefused, AdminUnavailable)
export type AdminError = typeof AdminError.Type

/** The actions, as signed: each RPC decodes only its own, so a signed close never passes for a restore. */
export const RestoreAction = Schema.Struct({
  kind: Schema.Literal("restore"),
  to: Schema.Union(Schema.Struct({ position: Schema.NonNegativeInt }), Schema.Struct({ time: Schema.String }))
})
export type RestoreAction = typeof RestoreAction.Type
export const CloseAction = Schema.Struct({ kind: Schema.Literal("close") })

export const RestoreAnswer = Schema.Struct({
  position: Schema.Number,
  generation: Schema.Number,
  previousPosition: Schema.Number,
  previousGeneration: Schema.Number,
  /** Milliseconds the database refused calls (the writer drained, closed, the file built and published). */
  unavailableMillis: Schema.Number,
  /** The runner that did it. */
  runner: Schema.String
})
export type RestoreAnswer = typeof RestoreAnswer.Type

export const CloseAnswer = Schema.Struct({
  /** The runner the database was closed on, and whether it was open there. */
  runner: Schema.String,
  wasOpen: Schema.Boolean,
  unavailableMillis: Schema.Number
})
export type CloseAnswer = typeof CloseAnswer.Type

/** Point-in-time restore of this database, online: a new history of its archive (see `ArchiveRestore`). */
export const Restore = Rpc.make("Restore", { payload: AdminCall, success: RestoreAnswer, error: AdminError })
/** Closes this database's writer where it runs (cleanly, every commit shipped): its next call opens it on its shard's owner. */
export const Close = Rpc.make("Close", { payload: AdminCall, success: CloseAnswer, error: AdminError })

export const DatabaseEntity = Entity.make(entityType, [Mutate, Query, Snapshot, Restore, Close])

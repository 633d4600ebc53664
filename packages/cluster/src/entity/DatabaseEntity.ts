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

export const DatabaseEntity = Entity.make(entityType, [Mutate, Query, Snapshot])

/**
 * Synchronization under `/db/*`: snapshot pages as a plain RPC, changes as a streaming
 * RPC that catches up from a cursor and then stays live until the client disconnects.
 */
import { Rpc, RpcGroup } from "@effect/rpc"
import { Schema } from "effect"
import { PublicError } from "./PublicError.js"
import { ChangesRequest, SnapshotPage, SnapshotRequest, SyncMessage } from "./Sync.js"

export class SyncRpcs extends RpcGroup.make(
  Rpc.make("SyncSnapshot", { payload: SnapshotRequest, success: SnapshotPage, error: PublicError }),
  Rpc.make("SyncChanges", { payload: ChangesRequest, success: SyncMessage, error: PublicError, stream: true })
) {}

/**
 * `SyncRpcs` as the server receives it: payloads as given, decoded once by the engine
 * (strictly, with the operator's filter budgets), like `DataRpcsWire`.
 */
export class SyncRpcsWire extends RpcGroup.make(
  Rpc.make("SyncSnapshot", { payload: Schema.Unknown, success: SnapshotPage, error: PublicError }),
  Rpc.make("SyncChanges", { payload: Schema.Unknown, success: SyncMessage, error: PublicError, stream: true })
) {}

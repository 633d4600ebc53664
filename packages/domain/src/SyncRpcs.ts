/**
 * Synchronization under `/db/*`: snapshot pages as a plain RPC, changes as a streaming
 * RPC that catches up from a cursor and then stays live until the client disconnects.
 */
import { Rpc, RpcGroup } from "@effect/rpc"
import { PublicError } from "./PublicError.js"
import { ChangesRequest, SnapshotPage, SnapshotRequest, SyncMessage } from "./Sync.js"

export class SyncRpcs extends RpcGroup.make(
  Rpc.make("SyncSnapshot", { payload: SnapshotRequest, success: SnapshotPage, error: PublicError }),
  Rpc.make("SyncChanges", { payload: ChangesRequest, success: SyncMessage, error: PublicError, stream: true })
) {}

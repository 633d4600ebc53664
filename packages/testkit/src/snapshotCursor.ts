/**
 * Takes a whole sync snapshot of `scope` page by page and answers its checkpoint's cursor,
 * discarding the records: how a test or benchmark gets a stream to the live edge.
 */
import type { SyncScope } from "@cairn/domain/Sync"
import { Effect } from "effect"

/** The part of a sync RPC client this needs (`SyncClient.http` answers one). */
export interface SnapshotRpc<E> {
  readonly SyncSnapshot: (request: {
    readonly scope: SyncScope
    readonly after?: string
  }) => Effect.Effect<{ readonly checkpoint?: { readonly cursor: string } | undefined; readonly next?: string | undefined }, E>
}

export const snapshotCursor = <E>(rpc: SnapshotRpc<E>, scope: SyncScope): Effect.Effect<string, E> =>
  Effect.gen(function* () {
    let after: string | undefined
    for (;;) {
      const page = yield* rpc.SyncSnapshot({ scope, ...(after ? { after } : {}) })
      if (page.checkpoint !== undefined) return page.checkpoint.cursor
      after = page.next
    }
  })

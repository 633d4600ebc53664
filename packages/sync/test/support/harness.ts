/**
 * Drives the sync engine the way a client would, without a transport: snapshot all
 * pages, resume from a checkpoint, apply batches to an in-memory copy, follow
 * resnapshot instructions. Tests compare the copy with the oracle.
 */
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import type { Principal } from "@cairn/domain/Principal"
import type { SnapshotPage, SyncCheckpoint, SyncMessage, SyncScope } from "@cairn/domain/Sync"
import type { Database } from "@cairn/store/Databases"
import type { StoreConfigShape } from "@cairn/store/StoreConfig"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { Sync } from "@cairn/sync/Sync"
import { SyncConfig, type SyncConfigShape } from "@cairn/sync/SyncConfig"
import { Chunk, Effect, Layer, Redacted, Stream } from "effect"
import { everything, storeLayer, viewOf } from "./tracker.js"

export const secret = Redacted.make("sync-test-secret-0123456789abcdef")

/** Sync settings, plus the store's compaction settings (the retained history sync resumes from). */
export type EngineOptions = Partial<SyncConfigShape> & Partial<Pick<StoreConfigShape, "retainedCommits" | "compactEvery">>

/** The store over `dataDir` and the sync engine with `config`. */
export const engineLayer = (dataDir: string, options: EngineOptions = {}) => {
  const { retainedCommits, compactEvery, ...config } = options
  return Layer.merge(
    storeLayer(dataDir, {
      ...(retainedCommits !== undefined ? { retainedCommits } : {}),
      ...(compactEvery !== undefined ? { compactEvery } : {})
    }),
    Sync.Default.pipe(Layer.provide([Sealer.layer(secret), SyncConfig.layer(config), QueryLimits.layer()]))
  )
}

export interface Snapshot {
  readonly records: Map<string, Record<string, unknown>>
  readonly checkpoint: SyncCheckpoint
  readonly pages: ReadonlyArray<SnapshotPage>
}

export const snapshotAll = (database: Database, principal: Principal, scope: SyncScope = everything, view?: View) =>
  Effect.gen(function* () {
    const sync = yield* Sync
    const v = view ?? (yield* viewOf(principal))
    const records = new Map<string, Record<string, unknown>>()
    const pages: Array<SnapshotPage> = []
    let after: string | undefined
    for (;;) {
      const page = yield* sync.snapshot(principal, v, database, { scope, ...(after !== undefined ? { after } : {}) })
      pages.push(page)
      for (const r of page.records) records.set(`${r.entity}/${r.id}`, { ...r.record })
      if (page.checkpoint) return { records, checkpoint: page.checkpoint, pages } satisfies Snapshot
      after = page.next!
    }
  })

/** The messages of one non-live changes request (the first `take` only: a reader that leaves early). */
export const changesOnce = (database: Database, principal: Principal, cursor: string, scope: SyncScope = everything, view?: View, take?: number) =>
  Effect.gen(function* () {
    const sync = yield* Sync
    const v = view ?? (yield* viewOf(principal))
    const stream = sync.changes(principal, v, database, { scope, cursor, live: false })
    return Chunk.toReadonlyArray(yield* Stream.runCollect(take === undefined ? stream : Stream.take(stream, take)))
  })

export const applyBatch = (records: Map<string, Record<string, unknown>>, message: SyncMessage) => {
  if (message._tag !== "SyncBatch") throw new Error(`expected a batch, got ${JSON.stringify(message)}`)
  for (const change of message.changes) {
    if (change._tag === "Upsert") records.set(`${change.entity}/${change.id}`, { ...change.record })
    else records.delete(`${change.entity}/${change.id}`)
  }
}

/** A client in memory: its records and checkpoint, kept current by `catchUp`. */
export interface MemoryClient {
  readonly principal: Principal
  readonly scope: SyncScope
  records: Map<string, Record<string, unknown>>
  checkpoint: SyncCheckpoint | undefined
  resnapshots: Array<string>
}

export const memoryClient = (principal: Principal, scope: SyncScope = everything): MemoryClient => ({
  principal,
  scope,
  records: new Map(),
  checkpoint: undefined,
  resnapshots: []
})

/**
 * Snapshot when needed, then resume until caught up, following resnapshot instructions; with
 * `batches`, leave after that many messages of the changes stream (not caught up, at a checkpoint).
 */
export const catchUp = (database: Database, client: MemoryClient, batches?: number) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (client.checkpoint === undefined) {
        const snap = yield* snapshotAll(database, client.principal, client.scope)
        client.records = snap.records
        client.checkpoint = snap.checkpoint
      }
      const messages = yield* changesOnce(database, client.principal, client.checkpoint.cursor, client.scope, undefined, batches)
      const last = messages[messages.length - 1]!
      if (last._tag === "Resnapshot") {
        client.resnapshots.push(last.reason)
        client.records = new Map()
        client.checkpoint = undefined
        continue
      }
      if (last._tag !== "SyncBatch") return yield* Effect.dieMessage(`stream ended with ${last._tag}`)
      for (const m of messages) applyBatch(client.records, m)
      client.checkpoint = last.checkpoint
      return
    }
    return yield* Effect.dieMessage(`no convergence after 5 resnapshots: ${client.resnapshots.join(", ")}`)
  })

export const fullView = (view: View) => View.full(view.catalog)

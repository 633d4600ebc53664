/**
 * Operator limits of synchronization: snapshot page and total sizes, changes batch sizes, and
 * how much work one resume may do before a resnapshot is cheaper. (The retained change history is the
 * store's: compaction is its job, see `StoreConfig`.)
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Context, Layer } from "effect"

export interface SyncConfigShape {
  /** Most records in one snapshot page. */
  readonly pageRows: number
  /** Most bytes (JSON) of records in one snapshot page; a page holds at least one record. */
  readonly pageBytes: number
  /** The snapshot size limit: a scope holding more records fails with `query_budget_exceeded`. */
  readonly maxSnapshotRows: number
  /** Most commits one changes batch replays; a cursor further behind gets a resnapshot. */
  readonly maxReplayCommits: number
  /**
   * Most bytes of stored changes (the log's JSON) one changes batch covers; a stream further
   * behind catches up in several batches, each with its checkpoint. A batch holds at least one
   * commit, so a larger commit goes alone.
   */
  readonly maxBatchBytes: number
  /**
   * Most commits one changes batch replays, whatever their size. A stream whose policy reads
   * other rows cannot be cut into batches (its range is decided against the state at its end):
   * further behind than one batch (this or `maxBatchBytes`), it is sent a resnapshot.
   */
  readonly maxBatchCommits: number
  /** Records whose visibility one batch re-checks after an access change before resnapshotting instead. */
  readonly maxDependents: number
}

export const defaults: SyncConfigShape = {
  pageRows: 1000,
  pageBytes: 1024 * 1024,
  maxSnapshotRows: 200_000,
  maxReplayCommits: 20_000,
  maxBatchBytes: 1024 * 1024,
  maxBatchCommits: 250,
  maxDependents: 512
}

const positive = (name: string, fallback: number) => positiveInteger(name).pipe(Config.withDefault(fallback))

export const syncConfig: Config.Config<SyncConfigShape> = Config.all({
  pageRows: positive("CAIRN_SYNC_PAGE_ROWS", defaults.pageRows),
  pageBytes: positive("CAIRN_SYNC_PAGE_BYTES", defaults.pageBytes),
  maxSnapshotRows: positive("CAIRN_SYNC_MAX_SNAPSHOT_ROWS", defaults.maxSnapshotRows),
  maxReplayCommits: positive("CAIRN_SYNC_MAX_REPLAY_COMMITS", defaults.maxReplayCommits),
  maxBatchBytes: positive("CAIRN_SYNC_MAX_BATCH_BYTES", defaults.maxBatchBytes),
  maxBatchCommits: positive("CAIRN_SYNC_MAX_BATCH_COMMITS", defaults.maxBatchCommits),
  maxDependents: positive("CAIRN_SYNC_MAX_DEPENDENTS", defaults.maxDependents)
})

/** Required, never defaulted: a layer graph that forgets the sync limits must not build. */
export class SyncConfig extends Context.Tag("@cairn/sync/SyncConfig")<SyncConfig, SyncConfigShape>() {
  static readonly layer = (options: Partial<SyncConfigShape> = {}) => Layer.succeed(SyncConfig, { ...defaults, ...options })
  static readonly layerConfig = Layer.effect(SyncConfig, syncConfig)
}

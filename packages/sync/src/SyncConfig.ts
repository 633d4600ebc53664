/**
 * Operator limits of synchronization: snapshot page and total sizes, the retained
 * change history, and how much work one resume may do before a resnapshot is cheaper.
 */
import { Config, Context, Duration, Layer } from "effect"

export interface SyncConfigShape {
  /** Most records in one snapshot page. */
  readonly pageRows: number
  /** Most bytes (JSON) of records in one snapshot page; a page holds at least one record. */
  readonly pageBytes: number
  /** The snapshot size limit: a scope holding more records fails with `query_budget_exceeded`. */
  readonly maxSnapshotRows: number
  /** Commits whose change payloads compaction keeps; older cursors get a resnapshot. */
  readonly retainedCommits: number
  /** Most commits one changes batch replays; a cursor further behind gets a resnapshot. */
  readonly maxReplayCommits: number
  /** Records whose visibility one batch re-checks after an access change before resnapshotting instead. */
  readonly maxDependents: number
  /** How often an open database's log is compacted. */
  readonly compactEvery: Duration.Duration
}

export const defaults: SyncConfigShape = {
  pageRows: 1000,
  pageBytes: 1024 * 1024,
  maxSnapshotRows: 200_000,
  retainedCommits: 100_000,
  maxReplayCommits: 20_000,
  maxDependents: 512,
  compactEvery: Duration.minutes(5)
}

const positive = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a positive integer`, validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )

export const syncConfig: Config.Config<SyncConfigShape> = Config.all({
  pageRows: positive("CAIRN_SYNC_PAGE_ROWS", defaults.pageRows),
  pageBytes: positive("CAIRN_SYNC_PAGE_BYTES", defaults.pageBytes),
  maxSnapshotRows: positive("CAIRN_SYNC_MAX_SNAPSHOT_ROWS", defaults.maxSnapshotRows),
  retainedCommits: positive("CAIRN_SYNC_RETAINED_COMMITS", defaults.retainedCommits),
  maxReplayCommits: positive("CAIRN_SYNC_MAX_REPLAY_COMMITS", defaults.maxReplayCommits),
  maxDependents: positive("CAIRN_SYNC_MAX_DEPENDENTS", defaults.maxDependents),
  compactEvery: Config.duration("CAIRN_SYNC_COMPACT_EVERY").pipe(Config.withDefault(defaults.compactEvery))
})

/** Required, never defaulted: a layer graph that forgets the sync limits must not build. */
export class SyncConfig extends Context.Tag("@cairn/sync/SyncConfig")<SyncConfig, SyncConfigShape>() {
  static readonly layer = (options: Partial<SyncConfigShape> = {}) => Layer.succeed(SyncConfig, { ...defaults, ...options })
  static readonly layerConfig = Layer.effect(SyncConfig, syncConfig)
}

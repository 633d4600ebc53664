/**
 * Operator settings of the store: where database files live, how durable a commit is,
 * how many databases stay open, the writer's queue and group-commit limits, and how
 * much change history compaction keeps and how often it runs.
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Context, Duration, Layer } from "effect"

export type Synchronous = "OFF" | "NORMAL" | "FULL" | "EXTRA"

export interface StoreConfigShape {
  /** Directory under which `databases/<digest>.sqlite` files are kept. */
  readonly dataDir: string
  /** SQLite `synchronous` for every writer connection; FULL makes each commit durable on power loss. */
  readonly synchronous: Synchronous
  /** Open databases kept before the least recently used idle one is closed. */
  readonly maxOpenDatabases: number
  /** An unused database is closed after this long. */
  readonly idleTimeout: Duration.Duration
  /** Queued invocations per database; past it `mutate` fails fast with `Overloaded`. */
  readonly writerQueueLimit: number
  /** Most invocations one group-commit transaction takes. */
  readonly groupCommitMaxBatch: number
  /** Commits whose change payloads compaction keeps; sync sends older cursors to a resnapshot. */
  readonly retainedCommits: number
  /** How often each open database's log is compacted. */
  readonly compactEvery: Duration.Duration
  /**
   * How long a decided intent's receipt is kept, by the time its invocation id (a UUIDv7) carries:
   * compaction prunes older ones, and an invocation id older than the pruned horizon is refused
   * (`invocation_conflict`), never executed again.
   */
  readonly receiptRetention: Duration.Duration
  /** How long a commit's header (its log row) is kept once compaction dropped its change payload. */
  readonly commitRetention: Duration.Duration
  /** Databases this deployment may create; one more is refused (nothing created). */
  readonly maxDatabases: number
  /**
   * The operator's explicit override: start on a used data directory whose registry is gone or
   * empty, as a new deployment (every tenant's past invocations forgotten). Off by default.
   */
  readonly acceptLostRegistry: boolean
  /**
   * SQLite page cache per connection, in KiB (each open database has a write and a read
   * connection). The driver's own default is 16 MiB per connection, which many open large
   * databases would each grow to; SQLite's upstream default of 2 MiB is the default here. It bounds
   * a database in use: once idle (unused for a second), its connections give their cache back
   * (`PRAGMA shrink_memory`, see `Raw.trim`), so the many idle databases of a server do not each
   * keep their working set.
   */
  readonly sqliteCacheKib: number
  /**
   * How long a database's read connection stays open unused. Single-statement reads run on the
   * write connection when it is free; the read connection opens only for reads that span yields
   * (sync, backup, checks, reads during a compaction) and closes again after this idle time.
   */
  readonly readerIdleTimeout: Duration.Duration
}

export const storeDefaults = {
  synchronous: "FULL",
  maxOpenDatabases: 64,
  idleTimeout: Duration.minutes(5),
  writerQueueLimit: 1024,
  groupCommitMaxBatch: 256,
  retainedCommits: 100_000,
  compactEvery: Duration.minutes(5),
  receiptRetention: Duration.days(30),
  commitRetention: Duration.days(30),
  maxDatabases: 10_000,
  acceptLostRegistry: false,
  sqliteCacheKib: 2048,
  readerIdleTimeout: Duration.seconds(30)
} as const satisfies Omit<StoreConfigShape, "dataDir">

export const storeConfig: Config.Config<StoreConfigShape> = Config.all({
  dataDir: Config.string("CAIRN_DATA_DIR").pipe(Config.withDefault("./.cairn")),
  synchronous: Config.literal("OFF", "NORMAL", "FULL", "EXTRA")("CAIRN_SQLITE_SYNCHRONOUS").pipe(
    Config.withDefault(storeDefaults.synchronous)
  ),
  maxOpenDatabases: positiveInteger("CAIRN_MAX_OPEN_DATABASES").pipe(Config.withDefault(storeDefaults.maxOpenDatabases)),
  idleTimeout: Config.duration("CAIRN_DATABASE_IDLE_TIMEOUT").pipe(Config.withDefault(storeDefaults.idleTimeout)),
  writerQueueLimit: positiveInteger("CAIRN_WRITER_QUEUE_LIMIT").pipe(Config.withDefault(storeDefaults.writerQueueLimit)),
  groupCommitMaxBatch: positiveInteger("CAIRN_GROUP_COMMIT_MAX_BATCH").pipe(Config.withDefault(storeDefaults.groupCommitMaxBatch)),
  // Named for what they serve: the history sync can resume from.
  retainedCommits: positiveInteger("CAIRN_SYNC_RETAINED_COMMITS").pipe(Config.withDefault(storeDefaults.retainedCommits)),
  compactEvery: Config.duration("CAIRN_SYNC_COMPACT_EVERY").pipe(Config.withDefault(storeDefaults.compactEvery)),
  receiptRetention: Config.duration("CAIRN_RECEIPT_RETENTION").pipe(Config.withDefault(storeDefaults.receiptRetention)),
  commitRetention: Config.duration("CAIRN_COMMIT_RETENTION").pipe(Config.withDefault(storeDefaults.commitRetention)),
  maxDatabases: positiveInteger("CAIRN_MAX_DATABASES").pipe(Config.withDefault(storeDefaults.maxDatabases)),
  acceptLostRegistry: Config.boolean("CAIRN_ACCEPT_LOST_REGISTRY").pipe(Config.withDefault(storeDefaults.acceptLostRegistry)),
  sqliteCacheKib: positiveInteger("CAIRN_SQLITE_CACHE_KIB").pipe(Config.withDefault(storeDefaults.sqliteCacheKib)),
  readerIdleTimeout: Config.duration("CAIRN_READER_IDLE_TIMEOUT").pipe(Config.withDefault(storeDefaults.readerIdleTimeout))
})

export class StoreConfig extends Context.Tag("@cairn/store/StoreConfig")<StoreConfig, StoreConfigShape>() {
  static readonly layerConfig = Layer.effect(StoreConfig, storeConfig)
  static readonly layer = (options: Partial<StoreConfigShape> & { readonly dataDir: string }) =>
    Layer.succeed(StoreConfig, { ...storeDefaults, ...options })
}

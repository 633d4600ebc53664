/**
 * An open database as its callers see it: its reader, its hot-path reads, its single writer. Got
 * from `Databases.activate` / `Databases.withDatabase`; valid while the scope it was activated in is open.
 */
import type { SqlClient } from "@effect/sql"
import type { Effect } from "effect"
import { type Catalog } from "@cairn/catalog/Catalog"
import { type DatabaseId } from "@cairn/domain/Ids"
import { type Receipt } from "@cairn/domain/Receipt"
import type * as Writer from "./Writer.js"

/**
 * What reads need of a database: the owner's open file, or a followed copy of it (a replica). Reads
 * (query, snapshot, live changes, downloads) take this, never the writer.
 */
export type ReadableDatabase = Pick<Database, "id" | "catalog" | "reader" | "values" | "position" | "committed">

/** An open database. Valid while the scope it was activated in is open. */
export interface Database {
  /** Opaque id (a digest of the key): safe for logs and metrics, never public. */
  readonly id: DatabaseId
  readonly catalog: Catalog
  /**
   * A read-only connection for queries and sync, opened on first use and closed once idle for
   * `readerIdleTimeout` (never while a statement or transaction holds it). This client is built
   * on first use too, and dropped again once the database is idle: take it when needed, not ahead.
   */
  readonly reader: SqlClient.SqlClient
  /**
   * One read-only statement, its rows as arrays of column values: the planner's hot path (a cached
   * prepared statement, run synchronously on the write connection between its transactions, else on
   * the read connection). It sees the latest committed state, never an uncommitted write.
   */
  readonly values: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>>
  /** The single writer: every operation of this database passes through it. */
  readonly submit: (invocation: Writer.Invocation) => Effect.Effect<Receipt, Writer.SubmitError>
  /** The last committed position (0 when nothing is committed). */
  readonly position: Effect.Effect<number>
  /** Invocations waiting for the writer. */
  readonly queued: Effect.Effect<number>
  /** The last committed position, as it changes: what sync's live tail waits on. */
  readonly committed: Writer.Writer["committed"]
  /**
   * Compacts the log now, as its scheduled job does every `compactEvery`: keeps the change
   * payloads of the last `retainedCommits` commits; answers how many commits lost theirs.
   */
  readonly compact: Effect.Effect<number>
}

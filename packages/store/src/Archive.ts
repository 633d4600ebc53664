/**
 * Where a database's acknowledged commits are made durable beyond this machine, if anywhere. The
 * store asks it before a database file is opened (`claim`, which may rebuild the file), once the file
 * is installed (`ready`), after each group commit and before any caller hears of it (`ship`), and after
 * a clean close (`closed`). Required, never defaulted: embedded mode provides `Archive.local`, which
 * keeps nothing beyond the local file, exactly as before the archive existed.
 */
import { Context, Data, Effect, Layer, type Option, Schema, type Scope } from "effect"
import type { Catalog } from "@cairn/catalog/Catalog"
import type { DatabaseId } from "@cairn/domain/Ids"
import type { Registry } from "./Registry.js"

/**
 * Where a database's archive blobs live in the deployment's object store: never a database id (those
 * are hex digests), so the file collector, which sweeps unreferenced blobs per database, skips it.
 */
export const namespaceOf = (databaseId: string): string => `archive-${databaseId}`
export const isArchiveNamespace = (namespace: string): boolean => namespace.startsWith("archive-")

/** A full `_cairn_commits` row, as the writer inserted it (change images included, never compacted). */
export const CommitRecord = Schema.Struct({
  position: Schema.Number,
  invocation_id: Schema.String,
  operation: Schema.String,
  target_entity: Schema.NullOr(Schema.String),
  target_id: Schema.NullOr(Schema.String),
  intent: Schema.String,
  subject: Schema.String,
  receipt: Schema.String,
  changes: Schema.String,
  committed_at: Schema.String
})
export type CommitRecord = typeof CommitRecord.Type

/** A `_cairn_receipts` row: every decided invocation, rejections included (they keep the position they saw). */
export const ReceiptRecord = Schema.Struct({
  invocation_id: Schema.String,
  intent: Schema.String,
  outcome: Schema.Literal("committed", "rejected"),
  position: Schema.Number,
  receipt: Schema.String
})
export type ReceiptRecord = typeof ReceiptRecord.Type

/** What one group commit decided: the commits at positions `(from, to]` and every receipt of the group. */
export interface Group {
  readonly from: number
  readonly to: number
  readonly commits: ReadonlyArray<CommitRecord>
  readonly receipts: ReadonlyArray<ReceiptRecord>
}

/**
 * Internal: the archive could not make something durable (`unavailable`), another process owns the
 * database now (`fenced`), or the archive does not continue the local file (`diverged`). Its
 * callers answer a retryable refusal; the reason and cause are for logs only.
 */
export class ArchiveFailed extends Data.TaggedError("ArchiveFailed")<{
  readonly reason: "unavailable" | "fenced" | "diverged"
  readonly cause?: unknown
}> {
  override get message(): string {
    return `archive ${this.reason}`
  }
}

/** What the store tells the archive when a database starts activating, before its file is opened. */
export interface Claim {
  readonly databaseId: DatabaseId
  /** The store's `databases/` directory, and the database's file in it. */
  readonly directory: string
  readonly filename: string
  readonly catalog: Catalog
  /** The data directory's registry: told when the archive rebuilt the file (`restored`), so its floor matches. */
  readonly registry: Registry
}

/** The opened, installed file, before its writer takes any invocation. */
export interface Installed {
  readonly outcome: "installed" | "unchanged" | "updated"
  readonly installId: string
  /** Its last committed position. */
  readonly position: number
  /** A consistent copy of the file at `path` (`VACUUM INTO`), made on its write connection between groups. */
  readonly vacuumInto: (path: string) => Effect.Effect<void>
}

/** One activation's hold on a database's archive: its scope is the activation's. */
export interface Session {
  readonly ready: (installed: Installed) => Effect.Effect<void, ArchiveFailed>
  /**
   * Makes one group durable. Runs after the local COMMIT, before any caller of the group is answered
   * and before the next group starts. A failure means nothing of the group is acknowledged: the writer
   * refuses its callers (retryable) and the store closes the database, whose next activation rebuilds.
   */
  readonly ship: (group: Group) => Effect.Effect<void, ArchiveFailed>
  /**
   * After a clean close (writer stopped, every commit shipped, file closed) at `position`: the local
   * file is exactly the archive's state, so the next activation may use it as it is.
   */
  readonly closed: (position: number) => Effect.Effect<void>
}

export interface ArchiveShape {
  /**
   * Whether the archive, not the local file, is the database (cluster mode): a storage fault of the
   * local file is then not kept until restart; the database closes and its next activation rebuilds
   * the file from the archive. False for `Archive.local`, where the file is all there is.
   */
  readonly authoritative: boolean
  /** None: nothing beyond the local file (embedded). Some: the file at `filename` is now the archive's, owned by this activation. */
  readonly claim: (claim: Claim) => Effect.Effect<Option.Option<Session>, ArchiveFailed, Scope.Scope>
}

export class Archive extends Context.Tag("@cairn/store/Archive")<Archive, ArchiveShape>() {
  /** Embedded: the local file is the database; nothing is shipped, claimed or rebuilt. */
  static readonly local: Layer.Layer<Archive> = Layer.succeed(Archive, { authoritative: false, claim: () => Effect.succeedNone })
}

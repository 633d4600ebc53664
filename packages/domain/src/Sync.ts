/**
 * Client synchronization messages: a sync scope, snapshot pages, change batches and
 * resnapshot instructions. Cursors are opaque and sealed; the checkpoint beside each
 * cursor tells the client whose facts it holds, so it never merges another principal's.
 */
import { Schema } from "effect"
import { PositionText } from "./Position.js"
import { Filter } from "./QueryDocument.js"
import { Row } from "./Query.js"
import { EntityRef, Name } from "./References.js"

/** One entity to keep in sync, optionally narrowed by a filter over its own fields. */
export const SyncEntity = Schema.Struct({
  from: EntityRef,
  where: Schema.optional(Filter)
})
export type SyncEntity = typeof SyncEntity.Type

/** Most entities in one sync scope. */
export const maxSyncEntities = 32

export const SyncScope = Schema.Struct({
  entities: Schema.Array(SyncEntity).pipe(Schema.minItems(1), Schema.maxItems(maxSyncEntities))
}).annotations({ identifier: "SyncScope" })
export type SyncScope = typeof SyncScope.Type

/**
 * Where a client stands: the sealed cursor plus what it is bound to, in the clear, so
 * a client can check a stored snapshot belongs to the same principal and database.
 */
export const SyncCheckpoint = Schema.Struct({
  /** Opaque, tamper-evident; pass it back to resume. */
  cursor: Schema.String,
  /** Subject of the principal the data was filtered for. */
  subject: Schema.String,
  /** Opaque digest naming the database; never the database key itself. */
  database: Schema.String,
  catalogToken: Schema.String,
  /** Opaque commit position the data is current to. */
  position: Schema.String
}).annotations({ identifier: "SyncCheckpoint" })
export type SyncCheckpoint = typeof SyncCheckpoint.Type

/** A record the client should hold, with only the fields the principal may see. */
export const SyncRecord = Schema.Struct({
  entity: Name,
  id: Schema.String,
  record: Row
})
export type SyncRecord = typeof SyncRecord.Type

export const SnapshotRequest = Schema.Struct({
  ifCatalog: Schema.optional(Schema.String),
  scope: SyncScope,
  /** The `next` of the previous page; omit it to start a snapshot. */
  after: Schema.optional(Schema.String),
  /** Read your writes: a position from a receipt or checkpoint; the snapshot is taken at it or later. */
  atLeast: Schema.optional(PositionText)
}).annotations({ identifier: "SnapshotRequest" })
export type SnapshotRequest = typeof SnapshotRequest.Type

/** One page of a snapshot: `next` while more pages remain, then `checkpoint` on the last. */
export const SnapshotPage = Schema.Struct({
  records: Schema.Array(SyncRecord),
  next: Schema.optional(Schema.String),
  checkpoint: Schema.optional(SyncCheckpoint)
}).annotations({ identifier: "SnapshotPage" })
export type SnapshotPage = typeof SnapshotPage.Type

export const ChangesRequest = Schema.Struct({
  scope: SyncScope,
  cursor: Schema.String,
  /** Keep the stream open for live changes (default); `false` ends it once caught up. */
  live: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "ChangesRequest" })
export type ChangesRequest = typeof ChangesRequest.Type

export const Upsert = Schema.TaggedStruct("Upsert", { entity: Name, id: Schema.String, record: Row })
export type Upsert = typeof Upsert.Type
export const Remove = Schema.TaggedStruct("Remove", { entity: Name, id: Schema.String })
export type Remove = typeof Remove.Type
export const SyncChange = Schema.Union(Upsert, Remove)
export type SyncChange = typeof SyncChange.Type

/** Changes in commit order (at most one per record); apply them and the checkpoint together. */
export const SyncBatch = Schema.TaggedStruct("SyncBatch", {
  changes: Schema.Array(SyncChange),
  checkpoint: SyncCheckpoint
})
export type SyncBatch = typeof SyncBatch.Type

/**
 * The wire text of a `SyncBatch` (its encoding's JSON), for a sender that writes one batch to
 * many streams: `syncChangesJson` encodes each change once (per change object, so streams
 * sent the same change share its text), `syncCheckpointJson` makes a stream's constant fields
 * once, and `syncBatchJson` frames the two. Keys in the schema's order: the text equals
 * `JSON.stringify(Schema.encodeSync(SyncBatch)(batch))`, byte for byte (see its test).
 */
export const syncBatchJson = (changesJson: string, checkpointJson: string): string =>
  `{"_tag":"SyncBatch","changes":${changesJson},"checkpoint":${checkpointJson}}`

const encodeChange = Schema.encodeSync(SyncChange)
const changeJson = new WeakMap<SyncChange, string>()
/** The JSON text of the encoded `changes`: each element's text made once per change object, then joined. */
export const syncChangesJson = (changes: ReadonlyArray<SyncChange>): string => {
  let text = "["
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!
    let json = changeJson.get(change)
    if (json === undefined) changeJson.set(change, (json = JSON.stringify(encodeChange(change))))
    text += i === 0 ? json : `,${json}`
  }
  return `${text}]`
}

/** The JSON text of an encoded `SyncCheckpoint` with these constant fields, from its cursor and position. */
export const syncCheckpointJson = (fixed: Pick<SyncCheckpoint, "subject" | "database" | "catalogToken">): ((cursor: string, position: string) => string) => {
  const rest = `,"subject":${JSON.stringify(fixed.subject)},"database":${JSON.stringify(fixed.database)},"catalogToken":${JSON.stringify(fixed.catalogToken)},"position":`
  return (cursor, position) => `{"cursor":${JSON.stringify(cursor)}${rest}${JSON.stringify(position)}}`
}

/**
 * Why a client must discard its data and take a new snapshot. Public and coarse on
 * purpose: it never says which rule, row or membership was involved.
 */
export const ResnapshotReason = Schema.Literal(
  "history_compacted",
  "catalog_changed",
  "access_changed",
  "cursor_mismatch",
  "too_far_behind"
)
export type ResnapshotReason = typeof ResnapshotReason.Type

export const Resnapshot = Schema.TaggedStruct("Resnapshot", {
  reason: ResnapshotReason,
  message: Schema.String
})
export type Resnapshot = typeof Resnapshot.Type

/**
 * Why the server ended a changes stream that the client should resume, with no data discarded:
 * `invalid_token` (OAuth's code, RFC 6750) when the access token the stream was opened with
 * expired: get a new one from the token source, then resume; `slow_reader` when the reader
 * stayed behind past the stream's stall bound: resume. Either way from the last checkpoint.
 */
export const SyncEndReason = Schema.Literal("invalid_token", "slow_reader")
export type SyncEndReason = typeof SyncEndReason.Type

/** The last message of a changes stream the server ended: resume from the last checkpoint received. */
export const SyncEnd = Schema.TaggedStruct("SyncEnd", {
  reason: SyncEndReason,
  message: Schema.String
})
export type SyncEnd = typeof SyncEnd.Type

export const syncEndMessages: Readonly<Record<SyncEndReason, string>> = {
  invalid_token: "The access token this stream was opened with expired; get a new token and resume from your last checkpoint.",
  slow_reader: "This stream waited too long for its reader; resume from your last checkpoint."
}

export const syncEnd = (reason: SyncEndReason): SyncEnd => ({ _tag: "SyncEnd", reason, message: syncEndMessages[reason] })

export const SyncMessage = Schema.Union(SyncBatch, Resnapshot, SyncEnd).annotations({ identifier: "SyncMessage" })
export type SyncMessage = typeof SyncMessage.Type

export const resnapshotMessages: Readonly<Record<ResnapshotReason, string>> = {
  history_compacted: "The change history after this cursor is no longer retained; discard local data and take a new snapshot.",
  catalog_changed: "A definition this scope relies on changed incompatibly since this cursor; discard local data and take a new snapshot.",
  access_changed: "Your access changed since this cursor; discard local data and take a new snapshot.",
  cursor_mismatch: "This cursor does not belong to this caller, database or scope; discard local data and take a new snapshot.",
  too_far_behind: "This cursor is further behind than one catch-up may replay for this scope; discard local data and take a new snapshot."
}

export const resnapshot = (reason: ResnapshotReason): Resnapshot => ({
  _tag: "Resnapshot",
  reason,
  message: resnapshotMessages[reason]
})

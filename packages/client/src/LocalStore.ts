/**
 * What a sync client's local store holds and offers, whatever it is built on (SQLite in Node,
 * IndexedDB in the browser). Types only, so the browser entry's declarations stay free of the
 * RPC client's Node-typed dependencies.
 */
import type { SyncChange, SyncCheckpoint, SyncRecord } from "@cairn/domain/Sync"
import type { Effect, Option, Stream } from "effect"

export interface StoredState {
  /** The key of the scope (and, in the browser, the signed-in identity) the data was synced for. */
  readonly scopeKey: string
  readonly checkpoint: SyncCheckpoint
}

/** A snapshot that was arriving when the client stopped. */
export interface StagedSnapshot {
  readonly scopeKey: string
  readonly next: string
}

export interface LocalRecord {
  readonly id: string
  readonly record: Readonly<Record<string, unknown>>
}

/**
 * What the loop needs of a local store, failing with the store's own error `E`. Every change
 * to records is made in one local transaction with the checkpoint it leads to.
 */
export interface LocalStore<E> {
  readonly state: Effect.Effect<Option.Option<StoredState>, E>
  readonly staged: Effect.Effect<Option.Option<StagedSnapshot>, E>
  /** Applies a batch and its checkpoint in one transaction. */
  readonly apply: (changes: ReadonlyArray<SyncChange>, checkpoint: SyncCheckpoint) => Effect.Effect<void, E>
  /** Starts staging a new snapshot (dropping any staged one); local records stay readable. */
  readonly beginSnapshot: (scopeKey: string) => Effect.Effect<void, E>
  /** Stages one page together with the continuation that follows it. */
  readonly stagePage: (records: ReadonlyArray<SyncRecord>, next: string) => Effect.Effect<void, E>
  /** Stages the last page and swaps the staged snapshot in for the records, with its checkpoint. */
  readonly commitSnapshot: (scopeKey: string, records: ReadonlyArray<SyncRecord>, checkpoint: SyncCheckpoint) => Effect.Effect<void, E>
  /** Forgets everything: records, checkpoint and staged pages. */
  readonly discard: Effect.Effect<void, E>
  /** The records of one entity, ordered by id. */
  readonly records: (entity: string) => Effect.Effect<ReadonlyArray<LocalRecord>, E>
  /** Every record, keyed `entity/id`: what tests compare against an oracle. */
  readonly dump: Effect.Effect<ReadonlyMap<string, Readonly<Record<string, unknown>>>, E>
  /** `records(entity)` again after every local change that touches the entity. */
  readonly watch: (entity: string) => Stream.Stream<ReadonlyArray<LocalRecord>, E>
}

export interface SyncStatus {
  /** The checkpoint the local data is current to, if any. */
  readonly checkpoint: Option.Option<SyncCheckpoint>
  /** Whether this session confirmed the local data belongs to the current principal and database. */
  readonly confirmed: boolean
  readonly resnapshots: number
}


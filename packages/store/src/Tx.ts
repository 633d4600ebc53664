/**
 * The transactional API operation handlers (and the mutation guard) use. Every call
 * runs inside the writer's transaction, in the invocation's savepoint; every write
 * records before/after images that become the commit's changes, which sync replays.
 */
import type { Effect, Option, Schema } from "effect"
import type { Entity } from "@cairn/catalog"

export type AnyEntity = Entity.Entity<string, any>
export type Entities = ReadonlyArray<AnyEntity>

/** The entity named `N` among `Es`. */
export type EntityNamed<Es extends Entities, N> = Extract<Es[number], { readonly name: N }>

/** A record of an entity as handlers see it: `id` plus the fields, decoded. */
export type RecordOf<E> = E extends Entity.Entity<any, any> ? Schema.Schema.Type<E["record"]> : never

export type NameOf<Es extends Entities> = Es[number]["name"]

/** Any record: what untyped callers (the mutation guard, loosely typed handlers) see. */
export type AnyRecord = { readonly id: string } & { readonly [field: string]: unknown }

type Rec<Es extends Entities, N> = string extends NameOf<Es> ? AnyRecord : RecordOf<EntityNamed<Es, N>>

/**
 * Reads. Failures of storage are defects of the invocation (rolled back, logged),
 * never something a handler has to handle.
 */
export interface TxRead<Es extends Entities = Entities> {
  /** The record with this id, if any. */
  readonly get: <N extends NameOf<Es>>(entity: N, id: string) => Effect.Effect<Option.Option<Rec<Es, N>>>
  /** Records whose fields equal all the given values (`undefined` matches a missing value), ordered by id. */
  readonly findBy: <N extends NameOf<Es>>(
    entity: N,
    where: Partial<Omit<Rec<Es, N>, "id">>
  ) => Effect.Effect<ReadonlyArray<Rec<Es, N>>>
}

/** Reads and writes. A value that does not satisfy the entity's schema is a defect. */
export interface Tx<Es extends Entities = Entities> extends TxRead<Es> {
  /** Inserts a record with a server-generated UUIDv7 id and returns the id. */
  readonly insert: <N extends NameOf<Es>>(entity: N, fields: Omit<Rec<Es, N>, "id">) => Effect.Effect<string>
  /** Changes some fields of an existing record (a missing record is a defect) and returns the result. */
  readonly patch: <N extends NameOf<Es>>(
    entity: N,
    id: string,
    fields: Partial<Omit<Rec<Es, N>, "id">>
  ) => Effect.Effect<Rec<Es, N>>
  /** Deletes a record; whether it existed. */
  readonly delete: <N extends NameOf<Es>>(entity: N, id: string) => Effect.Effect<boolean>
}

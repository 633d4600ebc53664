/**
 * An entity: a kind of record with typed fields (Effect Schemas), a server-generated
 * string `id`, to-one relationships through id fields, declared indexes and traits.
 */
import { Schema } from "effect"
import type { Trait } from "./Trait.js"

/** A to-one relationship: `via` is a field of this entity holding the target's `id`. */
export interface BelongsTo<Target extends string = string> {
  readonly _tag: "BelongsTo"
  readonly target: Target
  readonly via: string
}

export const belongsTo = <const Target extends string>(target: Target, via: string): BelongsTo<Target> => ({
  _tag: "BelongsTo",
  target,
  via
})

/** A definition or field kept for old clients while `replacement` is adopted (shown by `describe`). */
export interface Deprecation {
  readonly reason: string
  readonly replacement?: string
}

export interface Entity<Name extends string = string, Fields extends Schema.Struct.Fields = Schema.Struct.Fields> {
  readonly _tag: "Entity"
  readonly name: Name
  readonly description: string
  readonly fields: Fields
  readonly traits: ReadonlyArray<Trait>
  readonly relationships: { readonly [name: string]: BelongsTo }
  readonly indexes: ReadonlyArray<ReadonlyArray<string>>
  /** Set between the stages of an expand/contract change: the entity is on its way out. */
  readonly deprecated?: Deprecation
  /** Fields on their way out, each with its reason and replacement field. */
  readonly deprecatedFields: { readonly [field: string]: Deprecation }
  /** The record as stored and read: `id` plus the fields. */
  readonly record: Schema.Struct<Fields & { readonly id: typeof Schema.String }>
}

export const make = <const Name extends string, const Fields extends Schema.Struct.Fields>(
  name: Name,
  options: {
    readonly description: string
    readonly fields: Fields
    readonly traits?: ReadonlyArray<Trait>
    readonly relationships?: Readonly<Record<string, BelongsTo>>
    readonly indexes?: ReadonlyArray<ReadonlyArray<string>>
    readonly deprecated?: Deprecation
    readonly deprecatedFields?: Readonly<Record<string, Deprecation>>
  }
): Entity<Name, Fields> => ({
  _tag: "Entity",
  name,
  description: options.description,
  fields: options.fields,
  traits: options.traits ?? [],
  relationships: options.relationships ?? {},
  indexes: options.indexes ?? [],
  ...(options.deprecated ? { deprecated: options.deprecated } : {}),
  deprecatedFields: options.deprecatedFields ?? {},
  record: Schema.Struct({ ...options.fields, id: Schema.String })
})

export type RecordOf<E extends Entity<any, any>> = Schema.Schema.Type<E["record"]>

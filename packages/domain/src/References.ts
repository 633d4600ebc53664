/**
 * Exact references to catalog definitions and to records. These are the only
 * selectors a caller uses; database and catalog identifiers are never public.
 */
import { Schema } from "effect"

/** Names are identifiers; the catalog compiler enforces the precise grammar. */
export const Name = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))

export const EntityRef = Schema.Struct({ kind: Schema.Literal("entity"), name: Name })
export type EntityRef = typeof EntityRef.Type

export const TraitRef = Schema.Struct({ kind: Schema.Literal("trait"), name: Name })
export type TraitRef = typeof TraitRef.Type

export const OperationRef = Schema.Struct({
  kind: Schema.Literal("operation"),
  owner: EntityRef,
  name: Name
})
export type OperationRef = typeof OperationRef.Type

export const DefinitionRef = Schema.Union(EntityRef, TraitRef, OperationRef)
export type DefinitionRef = typeof DefinitionRef.Type

export const DefinitionKind = Schema.Literal("entity", "trait", "operation")
export type DefinitionKind = typeof DefinitionKind.Type

/** The record an operation acts on. `id` is a server-generated record identifier. */
export const Target = Schema.Struct({
  kind: Schema.Literal("entity"),
  entity: Name,
  id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))
})
export type Target = typeof Target.Type

export const entityRef = (name: string): EntityRef => ({ kind: "entity", name })
export const traitRef = (name: string): TraitRef => ({ kind: "trait", name })
export const operationRef = (owner: string, name: string): OperationRef => ({
  kind: "operation",
  owner: { kind: "entity", name: owner },
  name
})

/** A stable string form of a reference, used as a map key and in messages. */
export const refKey = (ref: DefinitionRef): string =>
  ref.kind === "operation" ? `operation:${ref.owner.name}.${ref.name}` : `${ref.kind}:${ref.name}`

/**
 * An operation: the only way to change data. Owned by an entity, named, with input
 * and output Effect Schemas published through discovery. A targeted operation acts on
 * one existing record of its owner; a targetless one (e.g. a create) acts on none.
 */
import type { Schema } from "effect"
import type { Deprecation, Entity } from "./Entity.js"

export interface Operation<
  Owner extends string = string,
  Name extends string = string,
  Input extends Schema.Schema.AnyNoContext = Schema.Schema.AnyNoContext,
  Output extends Schema.Schema.AnyNoContext = Schema.Schema.AnyNoContext,
  Targeted extends boolean = boolean
> {
  readonly _tag: "Operation"
  readonly owner: Owner
  readonly name: Name
  readonly description: string
  readonly targeted: Targeted
  readonly input: Input
  readonly output: Output
  /** Set while callers move to `replacement` (an operation `Owner.name`). */
  readonly deprecated?: Deprecation
}

export const make = <
  const Owner extends string,
  const Name extends string,
  Input extends Schema.Schema.AnyNoContext,
  Output extends Schema.Schema.AnyNoContext,
  const Targeted extends boolean
>(options: {
  readonly owner: Entity<Owner, any> | Owner
  readonly name: Name
  readonly description: string
  readonly targeted: Targeted
  readonly input: Input
  readonly output: Output
  readonly deprecated?: Deprecation
}): Operation<Owner, Name, Input, Output, Targeted> => ({
  _tag: "Operation",
  owner: (typeof options.owner === "string" ? options.owner : options.owner.name) as Owner,
  name: options.name,
  description: options.description,
  targeted: options.targeted,
  input: options.input,
  output: options.output,
  ...(options.deprecated ? { deprecated: options.deprecated } : {})
})

export type Any = Operation<string, string, Schema.Schema.AnyNoContext, Schema.Schema.AnyNoContext, boolean>

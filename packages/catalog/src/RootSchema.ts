/**
 * A named root schema: the set of definitions one application's databases share.
 * Deployments are assembled from a root schema, never from a schema in a resource.
 */
import type { Entity } from "./Entity.js"
import type * as Operation from "./Operation.js"
import type { Trait } from "./Trait.js"

export interface RootSchema<Name extends string = string> {
  readonly _tag: "RootSchema"
  readonly name: Name
  readonly traits: ReadonlyArray<Trait>
  readonly entities: ReadonlyArray<Entity<string, any>>
  readonly operations: ReadonlyArray<Operation.Any>
}

export const make = <const Name extends string>(
  name: Name,
  definitions: {
    readonly traits?: ReadonlyArray<Trait>
    readonly entities: ReadonlyArray<Entity<string, any>>
    readonly operations?: ReadonlyArray<Operation.Any>
  }
): RootSchema<Name> => ({
  _tag: "RootSchema",
  name,
  traits: definitions.traits ?? [],
  entities: definitions.entities,
  operations: definitions.operations ?? []
})

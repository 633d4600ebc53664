/**
 * A named root schema: the set of definitions one application's databases share.
 * Deployments are assembled from a root schema, never from a schema in a resource.
 * It keeps its entity and operation types, so handlers are typed from it alone.
 */
import type { Entity } from "./Entity.js"
import type { Migration } from "./Migration.js"
import type * as Operation from "./Operation.js"
import type { Trait } from "./Trait.js"

export interface RootSchema<
  Name extends string = string,
  Es extends ReadonlyArray<Entity<string, any>> = ReadonlyArray<Entity<string, any>>,
  Os extends ReadonlyArray<Operation.Any> = ReadonlyArray<Operation.Any>
> {
  readonly _tag: "RootSchema"
  readonly name: Name
  readonly traits: ReadonlyArray<Trait>
  readonly entities: Es
  readonly operations: Os
  /** Explicit migrations, in the order they apply (see `Migration`). */
  readonly migrations?: ReadonlyArray<Migration>
}

export const make = <
  const Name extends string,
  const Es extends ReadonlyArray<Entity<string, any>>,
  const Os extends ReadonlyArray<Operation.Any> = readonly []
>(
  name: Name,
  definitions: {
    readonly traits?: ReadonlyArray<Trait>
    readonly entities: Es
    readonly operations?: Os
    readonly migrations?: ReadonlyArray<Migration>
  }
): RootSchema<Name, Es, Os> => ({
  _tag: "RootSchema",
  name,
  traits: definitions.traits ?? [],
  entities: definitions.entities,
  operations: definitions.operations ?? ([] as unknown as Os),
  migrations: definitions.migrations ?? []
})

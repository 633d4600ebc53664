/**
 * Which rows of an entity a principal may see, in the query filter language with
 * concrete values (principal references already substituted by the policy) plus
 * relationship existence. The query planner and sync compile it; policy produces it.
 */
import type { Comparison, IsNull, Path, SetMembership } from "@cairn/domain/QueryDocument"

export type ScopeFilter =
  | Comparison
  | SetMembership
  | IsNull
  | { readonly op: "and"; readonly filters: ReadonlyArray<ScopeFilter> }
  | { readonly op: "or"; readonly filters: ReadonlyArray<ScopeFilter> }
  | { readonly op: "not"; readonly filter: ScopeFilter }
  /**
   * Some row of `entity` exists whose `field` equals the value at `path` of the outer
   * row, and which satisfies `where` (evaluated over `entity`).
   */
  | {
      readonly op: "exists"
      readonly entity: string
      readonly field: string
      readonly path: Path
      readonly where?: ScopeFilter
    }

export type RowScope =
  | { readonly _tag: "All" }
  | { readonly _tag: "None" }
  | { readonly _tag: "Where"; readonly filter: ScopeFilter }

export const all: RowScope = { _tag: "All" }
export const none: RowScope = { _tag: "None" }
export const where = (filter: ScopeFilter): RowScope => ({ _tag: "Where", filter })

/**
 * What policy decides about one operation for one principal, in a form the writer checks
 * inside its transaction: the target row and the records the input points at must lie
 * in the given row scopes. Failing any check answers exactly as for a nonexistent thing.
 */
import { RowScope } from "@cairn/catalog"

/** An id in the operation's input that must name a row of `entity` within `scope`. */
export interface Reference {
  /** Top-level input field holding the id; an absent (optional) value is not checked. */
  readonly inputField: string
  readonly entity: string
  readonly scope: RowScope.RowScope
}

export type MutationRule =
  /** The principal may not invoke the operation at all (it is also hidden from their view). */
  | { readonly _tag: "Deny" }
  | {
      readonly _tag: "Allow"
      /**
       * Targeted operations only: the target row (of the owner entity) must exist and lie
       * in this scope. It already includes the owner's read scope, so a target the
       * principal cannot see fails the same way as one that does not exist.
       */
      readonly target?: RowScope.RowScope
      /** Each also includes the referenced entity's read scope. */
      readonly references: ReadonlyArray<Reference>
    }

export const deny: MutationRule = { _tag: "Deny" }

export const allow = (target: RowScope.RowScope | undefined, references: ReadonlyArray<Reference>): MutationRule =>
  target === undefined ? { _tag: "Allow", references } : { _tag: "Allow", target, references }

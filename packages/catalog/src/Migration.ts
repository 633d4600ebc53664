/**
 * An explicit migration, declared in the application's root schema, in order. Its name is
 * recorded in each database's install record once applied, so it runs once per database.
 * `covers` names the definitions whose incompatible changes it accounts for (`Entity` for an
 * entity and every field of it, `Entity.field` for one field): a removal or a changed stored
 * type is refused at `cairn check` and at startup unless a migration covers it. `step`, when
 * given, is one bounded batch of work over the transactional API (the store's `Tx`), run by
 * the database's writer until it answers `"done"`; each batch commits on its own.
 *
 * A covered change of stored type never drops values silently: `convert` maps each stored value of
 * a retyped field (`Entity.field`, its old value in plain JSON form) to its new value (the new
 * schema's encoded form; `undefined`, a throw or a value the new schema rejects: not converted).
 * The plan runs it over every stored value and refuses while any would be lost, unless
 * `discards` names the field (or its entity): the operator's explicit acceptance of the loss.
 */
import type { Effect } from "effect"

export type StepResult = "done" | "more"

export interface Migration<Tx = any> {
  readonly _tag: "Migration"
  readonly name: string
  readonly description: string
  readonly covers: ReadonlyArray<string>
  readonly convert: Readonly<Record<string, (stored: unknown) => unknown>>
  readonly discards: ReadonlyArray<string>
  readonly step?: (tx: Tx) => Effect.Effect<StepResult>
}

export const make = <Tx = any>(options: {
  readonly name: string
  readonly description: string
  readonly covers?: ReadonlyArray<string>
  /** Per retyped field (`Entity.field`): its stored value, old type → new type. */
  readonly convert?: Readonly<Record<string, (stored: unknown) => unknown>>
  /** Fields (`Entity.field`) or entities whose stored values this migration knowingly drops. */
  readonly discards?: ReadonlyArray<string>
  readonly step?: (tx: Tx) => Effect.Effect<StepResult>
}): Migration<Tx> => ({
  _tag: "Migration",
  name: options.name,
  description: options.description,
  covers: options.covers ?? [],
  convert: options.convert ?? {},
  discards: options.discards ?? [],
  ...(options.step ? { step: options.step } : {})
})

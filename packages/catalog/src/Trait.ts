/**
 * A trait is a named set of fields. Entities declare the traits they carry and must
 * contain each trait field with the same stored representation (checked at compile).
 */
import type { Schema } from "effect"

export interface Trait<Name extends string = string, Fields extends Schema.Struct.Fields = Schema.Struct.Fields> {
  readonly _tag: "Trait"
  readonly name: Name
  readonly description: string
  readonly fields: Fields
}

export const make = <const Name extends string, const Fields extends Schema.Struct.Fields>(
  name: Name,
  options: { readonly description: string; readonly fields: Fields }
): Trait<Name, Fields> => ({ _tag: "Trait", name, description: options.description, fields: options.fields })

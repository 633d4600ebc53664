/**
 * The rule every numeric budget and limit setting follows: an integer above zero. Each
 * package reads its own `CAIRN_*` settings; this is the one place that rule and its
 * wording live, so every setting refuses a bad value the same way.
 */
import { Config } from "effect"

/**
 * The integer setting `name`, refused unless above zero. `unit` (e.g. "bytes") words the
 * refusal as "a positive number of <unit>"; without one it reads "a positive integer".
 * Defaults are added by the caller (`Config.withDefault`).
 */
export const positiveInteger = (name: string, unit?: string): Config.Config<number> =>
  Config.integer(name).pipe(
    Config.validate({
      message: unit === undefined ? `${name} must be a positive integer` : `${name} must be a positive number of ${unit}`,
      validation: (n) => n > 0
    })
  )

/**
 * Commit positions are integers in the database's single commit order (0 = nothing
 * committed yet). Callers see them only as opaque strings; the same encoding is used in
 * receipts, query bases, sync checkpoints and a read's `atLeast`.
 */
import { Schema } from "effect"

export const encode = (position: number): string => `c${position.toString(36).padStart(6, "0")}`

export const decode = (opaque: string): number | undefined => {
  if (!/^c[0-9a-z]{6,12}$/.test(opaque)) return undefined
  const n = parseInt(opaque.slice(1), 36)
  return Number.isSafeInteger(n) ? n : undefined
}

/** The later of two opaque positions (either may be absent or unreadable: the readable one wins). */
export const latest = (a: string | undefined, b: string | undefined): string | undefined => {
  const x = a === undefined ? undefined : decode(a)
  const y = b === undefined ? undefined : decode(b)
  if (x === undefined) return y === undefined ? undefined : b
  if (y === undefined) return a
  return y > x ? b : a
}

/** A position as callers pass it back (`atLeast`): the opaque text of a receipt, basis or checkpoint. */
export const PositionText = Schema.String.pipe(
  Schema.pattern(/^c[0-9a-z]{6,12}$/, { message: () => "Expected a position as a receipt, basis or checkpoint gives it (e.g. c00000a)." })
).annotations({
  identifier: "Position",
  // Plain text in JSON Schema (MCP tool lists stay small); the server checks the pattern with the message above.
  jsonSchema: { type: "string" }
})

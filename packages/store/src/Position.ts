/**
 * Commit positions are integers in the database's single commit order (0 = nothing
 * committed yet). Callers see them only as opaque strings; the same encoding is used in
 * receipts, query bases and sync cursors.
 */
export const encode = (position: number): string => `c${position.toString(36).padStart(6, "0")}`

export const decode = (opaque: string): number | undefined => {
  if (!/^c[0-9a-z]{6,12}$/.test(opaque)) return undefined
  const n = parseInt(opaque.slice(1), 36)
  return Number.isSafeInteger(n) ? n : undefined
}

/**
 * SQLite's order of stored values, for code that must agree with the database without
 * asking it: the planner checking an index walk's order, the policy evaluator deciding
 * a comparison in memory. Both must order exactly as SQLite's BINARY collation does.
 */

/** A value as SQLite stores it: NULL, a number (booleans as 0/1) or text. */
export type Stored = string | number | null

/** The stored form of a JSON value; anything without one (an object, `undefined`) is NULL. */
export const toStored = (value: unknown): Stored =>
  value === undefined || value === null
    ? null
    : typeof value === "boolean"
      ? value ? 1 : 0
      : typeof value === "number" || typeof value === "string"
        ? value
        : null

/**
 * Text by its UTF-8 bytes, which is code point order (not the UTF-16 code unit order of
 * `<`). A lone surrogate is stored as U+FFFD, so it compares as one.
 */
export const compareText = (a: string, b: string): number => {
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(j)!
    i += x > 0xffff ? 2 : 1
    j += y > 0xffff ? 2 : 1
    const cx = x >= 0xd800 && x <= 0xdfff ? 0xfffd : x
    const cy = y >= 0xd800 && y <= 0xdfff ? 0xfffd : y
    if (cx !== cy) return cx < cy ? -1 : 1
  }
  // Equal so far: the one with text left is the longer, hence later.
  return i < a.length ? 1 : j < b.length ? -1 : 0
}

/** NULL first, then numbers by value, then text by UTF-8 bytes. */
export const compare = (a: Stored, b: Stored): number => {
  if (a === b) return 0
  if (a === null) return -1
  if (b === null) return 1
  if (typeof a === "number" && typeof b === "number") return a < b ? -1 : a > b ? 1 : 0
  if (typeof a === "number") return -1
  if (typeof b === "number") return 1
  return compareText(a, b)
}

/** Keys compared term by term, each term ascending or (`descending[i]`) descending. */
export const compareKeys = (a: ReadonlyArray<Stored>, b: ReadonlyArray<Stored>, descending: ReadonlyArray<boolean>): number => {
  for (let i = 0; i < a.length; i++) {
    const c = compare(a[i]!, b[i]!)
    if (c !== 0) return descending[i] ? -c : c
  }
  return 0
}

/**
 * Every digest Cairn computes, in one place: content digests of canonical JSON (catalog
 * tokens, fingerprints, cursor bindings) and labelled digests of a few strings (file
 * names, public database names, the sealing key). Some of these are persisted, so their
 * byte layouts are frozen: change a label's version instead of the layout.
 */
import { createHash, hash } from "node:crypto"

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * The definition of canonical JSON: `JSON.stringify` with every object's entries sorted (digests
 * of it are persisted, e.g. invocation intents, so its output must never change).
 */
const sortedJson = (value: unknown): string | undefined =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => byCodeUnits(a, b)))
      : v
  )

/** Whether `key` is an array index, which `JSON.stringify` lists first (numerically), whatever the sort order. */
const isArrayIndex = (key: string) => {
  const first = key.charCodeAt(0)
  return first >= 48 && first <= 57 && /^(?:0|[1-9][0-9]*)$/.test(key)
}

/** `JSON.stringify(s)`: it only adds quotes unless `s` holds a quote, a backslash, a control or a surrogate. */
const quoted = (s: string) => {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s)
  }
  return `"${s}"`
}

/** Thrown when the plain-data writer meets anything it does not handle: `sortedJson` answers instead. */
const unusual: unique symbol = Symbol("unusual")

/** Own keys in code-unit order (an insertion sort for the usual handful of keys: no comparator calls). */
const sortedKeys = (value: object) => {
  const keys = Object.keys(value)
  if (keys.length > 16) return keys.sort(byCodeUnits)
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!
    let j = i - 1
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!
      j--
    }
    keys[j + 1] = key
  }
  return keys
}

/**
 * `sortedJson`'s exact output for plain data (plain objects and arrays of strings, finite
 * numbers, booleans and null, at most 64 deep), written directly: no sorted copy of every object
 * (the writer digests every invocation's input). Anything else throws `unusual`.
 */
const plainJson = (value: unknown, depth: number): string | undefined => {
  switch (typeof value) {
    case "string":
      return quoted(value)
    case "number":
      return Number.isFinite(value) ? String(value) : "null"
    case "boolean":
      return value ? "true" : "false"
    case "undefined":
    case "function":
    case "symbol":
      return undefined
    case "object": {
      if (value === null) return "null"
      if (depth > 64 || (value as { readonly toJSON?: unknown }).toJSON !== undefined) throw unusual
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype) throw unusual
        let out = "["
        for (let i = 0; i < value.length; i++) out += (i > 0 ? "," : "") + (plainJson(value[i], depth + 1) ?? "null")
        return out + "]"
      }
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) throw unusual
      let out = "{"
      for (const key of sortedKeys(value)) {
        if (isArrayIndex(key)) throw unusual
        const json = plainJson((value as Record<string, unknown>)[key], depth + 1)
        if (json !== undefined) out += (out.length > 1 ? "," : "") + quoted(key) + ":" + json
      }
      return out + "}"
    }
    default:
      throw unusual
  }
}

/** JSON with object keys sorted, so equal values always digest equally. */
export const canonicalJson = (value: unknown): string => {
  try {
    return plainJson(value, 0) as string
  } catch (error) {
    if (error !== unusual) throw error
    return sortedJson(value) as string
  }
}

/**
 * SHA-256 (base64url) of a string as is, or of any other value's canonical JSON. One-shot
 * (`crypto.hash`): no `Hash` object, whose native handle costs more to collect than to hash
 * with on the request paths that digest (cursors, plan fingerprints, intents).
 */
export const digest = (value: unknown): string => hash("sha256", typeof value === "string" ? value : canonicalJson(value), "base64url")

/** One SHA-256 result in the encodings its users need. */
export interface Labelled {
  readonly bytes: Buffer
  readonly hex: string
  readonly base64url: string
}

/**
 * SHA-256 over `label`, then each part preceded by a NUL: `label \0 part1 \0 part2 ...`.
 * The label names the use and its version, so digests of one use never collide with
 * another's. Persisted today: `labelled("cairn/database/v1", key).hex.slice(0, 32)` (the
 * database file name) and `labelled("cairn/sync/database/v1", key, installedAt)`.
 */
export const labelled = (label: string, ...parts: ReadonlyArray<string>): Labelled => {
  const running = createHash("sha256").update(label)
  for (const part of parts) running.update("\u0000").update(part)
  const bytes = running.digest()
  return { bytes, hex: bytes.toString("hex"), base64url: bytes.toString("base64url") }
}

/** The name of a database's file (without extension): persisted, so it must never change. */
export const databaseId = (databaseKey: string): string => labelled("cairn/database/v1", databaseKey).hex.slice(0, 32)

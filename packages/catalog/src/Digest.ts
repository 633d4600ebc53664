/**
 * Every digest Cairn computes, in one place: content digests of canonical JSON (catalog
 * tokens, fingerprints, cursor bindings) and labelled digests of a few strings (file
 * names, public database names, the sealing key). Some of these are persisted, so their
 * byte layouts are frozen: change a label's version instead of the layout.
 */
import { createHash } from "node:crypto"

/** JSON with object keys sorted, so equal values always digest equally. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v
  )

/** SHA-256 (base64url) of a string as is, or of any other value's canonical JSON. */
export const digest = (value: unknown): string =>
  createHash("sha256").update(typeof value === "string" ? value : canonicalJson(value)).digest("base64url")

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
  const hash = createHash("sha256").update(label)
  for (const part of parts) hash.update("\u0000").update(part)
  const bytes = hash.digest()
  return { bytes, hex: bytes.toString("hex"), base64url: bytes.toString("base64url") }
}

/** The name of a database's file (without extension): persisted, so it must never change. */
export const databaseId = (databaseKey: string): string => labelled("cairn/database/v1", databaseKey).hex.slice(0, 32)

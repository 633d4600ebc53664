/**
 * Sealed sync cursors and snapshot continuations. Both are bound to the principal's
 * subject, a digest naming the database, the requested scope, the principal's access
 * to it and the catalog token, so a cursor never resumes anyone else's view.
 */
import { createHash } from "node:crypto"
import type { Sealer } from "@cairn/catalog"
import { Position } from "@cairn/store"
import type { ResnapshotReason, SyncCheckpoint } from "@cairn/domain"
import { Option } from "effect"

/** What a cursor is bound to. */
export interface Binding {
  readonly subject: string
  /** Public digest naming the database (its key and installation), never the key itself. */
  readonly database: string
  readonly scope: string
  readonly access: string
  readonly catalogToken: string
}

export interface Cursor extends Binding {
  readonly position: number
}

export interface Continuation extends Binding {
  /** The position the snapshot's first page was read at: its cursor's position. */
  readonly start: number
  /** Index of the scope entry being read, and the last id sent of it. */
  readonly entry: number
  readonly after: string | null
  /** Records sent so far, for the snapshot size limit. */
  readonly sent: number
}

const CURSOR = "sync"
const PAGE = "sync-page"

/** The public digest naming a database: its key plus when it was installed, so a recreated database differs. */
export const databaseDigest = (databaseKey: string, installedAt: string): string =>
  createHash("sha256").update("cairn/sync/database/v1\u0000").update(databaseKey).update("\u0000").update(installedAt).digest("base64url").slice(0, 22)

const bindingOf = (b: Binding) => ({ s: b.subject, d: b.database, q: b.scope, a: b.access, t: b.catalogToken })

export const sealCursor = (sealer: Sealer, cursor: Cursor): string => sealer.seal(CURSOR, { v: 1, ...bindingOf(cursor), p: cursor.position })

export const checkpoint = (sealer: Sealer, cursor: Cursor): SyncCheckpoint => ({
  cursor: sealCursor(sealer, cursor),
  subject: cursor.subject,
  database: cursor.database,
  catalogToken: cursor.catalogToken,
  position: Position.encode(cursor.position)
})

const str = (u: unknown): u is string => typeof u === "string"
const int = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

const openBinding = (p: Record<string, unknown>): Binding | undefined =>
  str(p["s"]) && str(p["d"]) && str(p["q"]) && str(p["a"]) && str(p["t"])
    ? { subject: p["s"], database: p["d"], scope: p["q"], access: p["a"], catalogToken: p["t"] }
    : undefined

const openAs = (sealer: Sealer, purpose: string, sealed: string): Record<string, unknown> | undefined => {
  const opened = sealer.open(purpose, sealed)
  if (Option.isNone(opened)) return undefined
  const p = opened.value
  return typeof p === "object" && p !== null && (p as Record<string, unknown>)["v"] === 1 ? (p as Record<string, unknown>) : undefined
}

export const openCursor = (sealer: Sealer, sealed: string): Cursor | undefined => {
  const p = openAs(sealer, CURSOR, sealed)
  const binding = p && openBinding(p)
  return binding && int(p["p"]) ? { ...binding, position: p["p"] } : undefined
}

export const sealContinuation = (sealer: Sealer, c: Continuation): string =>
  sealer.seal(PAGE, { v: 1, ...bindingOf(c), p: c.start, e: c.entry, k: c.after, n: c.sent })

export const openContinuation = (sealer: Sealer, sealed: string): Continuation | undefined => {
  const p = openAs(sealer, PAGE, sealed)
  const binding = p && openBinding(p)
  return binding && int(p["p"]) && int(p["e"]) && (p["k"] === null || str(p["k"])) && int(p["n"])
    ? { ...binding, start: p["p"], entry: p["e"], after: p["k"], sent: p["n"] }
    : undefined
}

/**
 * Why a cursor cannot be resumed for `current`, if it cannot. Identity and scope are
 * checked first: a foreign cursor learns nothing about this view.
 */
export const mismatch = (cursor: Binding | undefined, current: Binding): ResnapshotReason | undefined => {
  if (cursor === undefined) return "cursor_mismatch"
  if (cursor.subject !== current.subject || cursor.database !== current.database || cursor.scope !== current.scope) {
    return "cursor_mismatch"
  }
  if (cursor.catalogToken !== current.catalogToken) return "catalog_changed"
  if (cursor.access !== current.access) return "access_changed"
  return undefined
}

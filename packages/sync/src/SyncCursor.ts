/**
 * Sealed sync cursors and snapshot continuations. Both are bound to the principal's
 * subject, a digest naming the database, the requested scope, the principal's access
 * to it and the catalog token, so a cursor never resumes anyone else's view.
 */
import { Digest } from "@cairn/catalog"
import { type SealerService } from "@cairn/catalog/Sealer"
import { Position } from "@cairn/store"
import type { ResnapshotReason, SyncCheckpoint } from "@cairn/domain/Sync"
import { Option, Schema } from "effect"

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

/** The public digest naming a database: its key plus when it was installed, so a recreated database differs. */
export const databaseDigest = (databaseKey: string, installedAt: string): string =>
  Digest.labelled("cairn/sync/database/v1", databaseKey, installedAt).base64url.slice(0, 22)

/** Sealed forms, with short keys since every batch carries one. */
const Count = Schema.NonNegativeInt
const BindingFields = { v: Schema.Literal(1), s: Schema.String, d: Schema.String, q: Schema.String, a: Schema.String, t: Schema.String }
const SealedCursor = Schema.Struct({ ...BindingFields, p: Count })
const SealedContinuation = Schema.Struct({ ...BindingFields, p: Count, e: Count, k: Schema.NullOr(Schema.String), n: Count })

const bindingOf = (b: Binding) => ({ v: 1 as const, s: b.subject, d: b.database, q: b.scope, a: b.access, t: b.catalogToken })
const openBinding = (p: typeof SealedCursor.Type | typeof SealedContinuation.Type): Binding =>
  ({ subject: p.s, database: p.d, scope: p.q, access: p.a, catalogToken: p.t })

export const sealCursor = (sealer: SealerService, cursor: Cursor): string =>
  sealer.seal("sync", SealedCursor, { ...bindingOf(cursor), p: cursor.position })

export const checkpoint = (sealer: SealerService, cursor: Cursor): SyncCheckpoint => ({
  cursor: sealCursor(sealer, cursor),
  subject: cursor.subject,
  database: cursor.database,
  catalogToken: cursor.catalogToken,
  position: Position.encode(cursor.position)
})

export const openCursor = (sealer: SealerService, sealed: string): Cursor | undefined =>
  Option.getOrUndefined(
    Option.map(sealer.open("sync", SealedCursor, sealed), (p) => ({ ...openBinding(p), position: p.p }))
  )

export const sealContinuation = (sealer: SealerService, c: Continuation): string =>
  sealer.seal("sync-page", SealedContinuation, { ...bindingOf(c), p: c.start, e: c.entry, k: c.after, n: c.sent })

export const openContinuation = (sealer: SealerService, sealed: string): Continuation | undefined =>
  Option.getOrUndefined(
    Option.map(sealer.open("sync-page", SealedContinuation, sealed), (p) => ({
      ...openBinding(p),
      start: p.p,
      entry: p.e,
      after: p.k,
      sent: p.n
    }))
  )

/**
 * Why a cursor cannot be resumed for `current`, if it cannot. Identity and scope are
 * checked first: a foreign cursor learns nothing about this view.
 */
export const mismatch = (
  cursor: Binding | undefined,
  current: Binding,
  /** Whether the cursor's catalog token still admits the scope's definitions (see `CatalogVersion`); default: equal tokens. */
  admits: (token: string) => boolean = (token) => token === current.catalogToken
): ResnapshotReason | undefined => {
  if (cursor === undefined) return "cursor_mismatch"
  if (cursor.subject !== current.subject || cursor.database !== current.database || cursor.scope !== current.scope) {
    return "cursor_mismatch"
  }
  if (cursor.catalogToken !== current.catalogToken && !admits(cursor.catalogToken)) return "catalog_changed"
  if (cursor.access !== current.access) return "access_changed"
  return undefined
}

/**
 * Sealed sync cursors and snapshot continuations. Both are bound to the principal's
 * subject, a digest naming the database, the requested scope, the principal's access
 * to it and the catalog token, so a cursor never resumes anyone else's view.
 */
import { createHmac, hash, type KeyObject, randomBytes, timingSafeEqual } from "node:crypto"
import { Digest } from "@cairn/catalog"
import { type SealerService } from "@cairn/catalog/Sealer"
import { Position } from "@cairn/store"
import { type ResnapshotReason, type SyncCheckpoint, syncCheckpointJson } from "@cairn/domain/Sync"
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
const openBinding = (p: { readonly s: string; readonly d: string; readonly q: string; readonly a: string; readonly t: string }): Binding =>
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

/**
 * A live stream's cursors, cheap enough for every batch: the binding and a fresh random
 * key are sealed once per stream, and each cursor is that seal, the position and an HMAC
 * of both under the sealed key (`<seal>.<position>.<mac>`). Only the sealer's secret opens
 * the key, so a cursor is as unforgeable and as bound as a fully sealed one; `openCursor`
 * opens both forms.
 */
const SealedStream = Schema.Struct({ ...BindingFields, v: Schema.Literal(2), k: Schema.String })
// One `update` of the whole text (the same bytes as several): each `update` call costs about
// as much as hashing a few hundred bytes, and a live stream MACs every batch it is sent.
const macOf = (key: Buffer | KeyObject, sealed: string, position: string) =>
  createHmac("sha256", key).update(`${sealed}.${position}`).digest().subarray(0, 16)

/**
 * `macOf(key, sealed, ·)` for one stream, as HMAC-SHA256 spelled out (RFC 2104) over two
 * one-shot hashes with the padded keys and the seal laid out once: no `Hmac` object, key
 * import or native handle per batch, which cost more than the hashing (the hub MACs every
 * stream's checkpoint on every commit). The same bytes as `macOf`, which opens them.
 */
const streamMac = (key: Buffer, sealed: string): ((position: string) => Buffer) => {
  const block = 64 // SHA-256's block size; the key (32 bytes) is padded with zeros to it.
  const prefix = Buffer.from(`${sealed}.`, "latin1")
  // The inner message: key ^ ipad, then `${sealed}.${position}` (a position is at most 11 base-36 digits).
  const inner = Buffer.alloc(block + prefix.length + 11, 0x36)
  // The outer message: key ^ opad, then the inner hash.
  const outer = Buffer.alloc(block + 32, 0x5c)
  for (let i = 0; i < key.length; i++) {
    inner[i]! ^= key[i]!
    outer[i]! ^= key[i]!
  }
  prefix.copy(inner, block)
  const start = block + prefix.length
  return (position) => {
    const end = start + inner.write(position, start, "latin1")
    hash("sha256", inner.subarray(0, end), "buffer").copy(outer, block)
    return hash("sha256", outer, "buffer").subarray(0, 16)
  }
}

export const checkpointer = (sealer: SealerService, binding: Binding): ((position: number) => SyncCheckpoint) => streamCheckpoints(sealer, binding).at

/**
 * `checkpointer`, plus each checkpoint as the JSON text of its encoded form (what the hub
 * writes), its constant fields made once per stream (`syncCheckpointJson`): no object, no
 * schema encoding per batch.
 */
export const streamCheckpoints = (
  sealer: SealerService,
  binding: Binding
): { readonly at: (position: number) => SyncCheckpoint; readonly json: (position: number) => string } => {
  const key = randomBytes(32)
  const sealed = sealer.seal("sync", SealedStream, { ...bindingOf(binding), v: 2 as const, k: key.toString("base64url") })
  const mac = streamMac(key, sealed)
  /** The cursor after the seal and its dot: the position and its MAC. */
  const tail = (position: number) => {
    const at = position.toString(36)
    return `${at}.${mac(at).toString("base64url")}`
  }
  const json = syncCheckpointJson(binding)
  return {
    at: (position) => ({
      cursor: `${sealed}.${tail(position)}`,
      subject: binding.subject,
      database: binding.database,
      catalogToken: binding.catalogToken,
      position: Position.encode(position)
    }),
    json: (position) => json(`${sealed}.${tail(position)}`, Position.encode(position))
  }
}

export const openCursor = (sealer: SealerService, sealed: string): Cursor | undefined => {
  const parts = sealed.split(".")
  if (parts.length === 1) {
    return Option.getOrUndefined(Option.map(sealer.open("sync", SealedCursor, sealed), (p) => ({ ...openBinding(p), position: p.p })))
  }
  if (parts.length !== 3 || !/^[0-9a-z]{1,11}$/.test(parts[1]!)) return undefined
  const [seal, at, mac] = parts as [string, string, string]
  return Option.getOrUndefined(
    Option.flatMap(sealer.open("sync", SealedStream, seal), (p) => {
      const expected = macOf(Buffer.from(p.k, "base64url"), seal, at)
      const given = Buffer.from(mac, "base64url")
      const position = parseInt(at, 36)
      return given.length === expected.length && timingSafeEqual(given, expected) && Number.isSafeInteger(position)
        ? Option.some({ ...openBinding(p), position })
        : Option.none()
    })
  )
}

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

/**
 * The operator's per-database actions, as they travel between `cairn doctor` / `cairn restore`
 * and a running deployment (the operator listener, embedded; a cluster's signed entity messages).
 * Databases are named by their opaque id (the digest of the key: what logs show); every text is
 * operator-facing, never shown to a caller.
 */
import { Schema } from "effect"

/** One database as the operator lists it. */
export const DatabaseListing = Schema.Struct({
  id: Schema.String,
  /** Last committed position the registry recorded (a lower bound of the file's). */
  position: Schema.Number,
  /** Bytes of its file and WAL on disk; null when the file is missing. */
  fileBytes: Schema.NullOr(Schema.Number),
  /** Bytes of the objects (files) it references in the object store, when known. */
  objectBytes: Schema.NullOr(Schema.Number),
  /** `open` (activated here), `idle` (closed until its next call), `held` (an operator's action), `faulted`. */
  state: Schema.Literal("open", "idle", "held", "faulted"),
  /** The storage fault refusing it: its kind and what was found. */
  fault: Schema.NullOr(Schema.Struct({ kind: Schema.String, detail: Schema.String }))
})
export type DatabaseListing = typeof DatabaseListing.Type

/** `PRAGMA integrity_check` of one database's file, run off the request path. */
export const IntegrityResult = Schema.Struct({
  id: Schema.String,
  ok: Schema.Boolean,
  /** SQLite's first problems, or why the file could not be checked. */
  problems: Schema.Array(Schema.String),
  /** The last committed position the file holds. */
  position: Schema.Number
})
export type IntegrityResult = typeof IntegrityResult.Type

/** What clearing a fault did: the fault forgotten, then the file opened as a call would. */
export const ClearFaultResult = Schema.Struct({
  id: Schema.String,
  /** The kind of the fault that was cleared; null when it had none. */
  cleared: Schema.NullOr(Schema.String),
  /** It opened with every check passed: its calls are served again. */
  serving: Schema.Boolean,
  /** Why it is still refused, when it is. */
  problem: Schema.NullOr(Schema.String)
})
export type ClearFaultResult = typeof ClearFaultResult.Type

/** An online restore from backups (embedded): the same choices as the offline `cairn restore`. */
export const RestoreRequest = Schema.Struct({
  id: Schema.String,
  /** Absolute directory of the backups, on the server's machine. */
  from: Schema.String,
  to: Schema.optional(Schema.Union(Schema.Struct({ position: Schema.NonNegativeInt }), Schema.Struct({ time: Schema.String }))),
  log: Schema.optional(Schema.String)
})
export type RestoreRequest = typeof RestoreRequest.Type

export const RestoreResult = Schema.Struct({
  id: Schema.String,
  position: Schema.Number,
  backupPosition: Schema.Number,
  replayed: Schema.Number,
  /** Where the previous file was moved aside (never deleted), if there was one. */
  replaced: Schema.NullOr(Schema.String),
  /** Milliseconds its calls were refused (retryably) while it was restored. */
  unavailableMillis: Schema.Number
})
export type RestoreResult = typeof RestoreResult.Type

/** The action could not be done; nothing was changed unless it says so. */
export const AdminProblem = Schema.Struct({ error: Schema.String })

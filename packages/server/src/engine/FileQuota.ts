/**
 * What one database's files take against its quota: the bytes stored (after de-duplication)
 * and the bytes promised to unfinished uploads — a resumable upload's declared length from its
 * creation on, a deferred-length or streamed upload's bytes as they are granted. Every decision
 * reads and changes these numbers in one synchronous step, so concurrent uploads race for the
 * last bytes and at most the quota is ever promised: `stored + reserved <= quota` holds
 * whatever the interleaving. A refusal names the quota, never the free bytes (that would tell
 * a writer whether a file of an exact size is already stored, since a stored duplicate is free).
 */
import { createHash } from "node:crypto"

/** One promise of bytes: an unfinished upload (resumable, keyed by its upload id) or a streamed one in flight. */
interface Reservation {
  bytes: number
  /** A resumable upload (counted against the per-principal and per-database bounds), not a streamed body. */
  readonly resumable: boolean
  /** Its length is not declared yet: it grows by grants, request by request. */
  deferred: boolean
}

export type QuotaRefusal =
  | { readonly _tag: "OverQuota"; readonly quotaBytes: number }
  | { readonly _tag: "TooManyUnfinished"; readonly per: "principal" | "database"; readonly limit: number }

export interface QuotaBounds {
  readonly quotaBytes: number
  readonly unfinishedPerPrincipal: number
  readonly unfinishedPerDatabase: number
}

/**
 * The upload id of a resumable upload names its creator: 32 random hex characters, then 32 of
 * sha256(random, subject). Nothing else is stored about who made it, so an upload still resumes
 * (and still counts against its creator) after a restart.
 */
export const ownedUploadId = (random: string, subject: string) =>
  random + createHash("sha256").update(`${random}\0${subject}`).digest("hex").slice(0, 32)
export const isOwnedBy = (id: string, subject: string) => id.length === 64 && ownedUploadId(id.slice(0, 32), subject) === id

export class FileQuota {
  private reservedBytes = 0
  private readonly reservations = new Map<string, Reservation>()

  constructor(
    /** Bytes of the database's stored objects. */
    private storedBytes: number,
    private readonly bounds: QuotaBounds
  ) {}

  get stored(): number {
    return this.storedBytes
  }
  get reserved(): number {
    return this.reservedBytes
  }
  /** Unfinished resumable uploads. */
  get unfinished(): number {
    let n = 0
    for (const r of this.reservations.values()) if (r.resumable) n++
    return n
  }
  has(key: string): boolean {
    return this.reservations.has(key)
  }
  isDeferred(key: string): boolean {
    return this.reservations.get(key)?.deferred ?? false
  }
  bytesOf(key: string): number {
    return this.reservations.get(key)?.bytes ?? 0
  }

  /** Bytes that may still be promised. */
  free(): number {
    return Math.max(0, this.bounds.quotaBytes - this.storedBytes - this.reservedBytes)
  }

  /** Whether everything stored and promised is within the quota (false after the quota was lowered). */
  withinQuota(): boolean {
    return this.storedBytes + this.reservedBytes <= this.bounds.quotaBytes
  }

  /**
   * Promises `bytes` to `key` (replacing what it held) when the total stays within the quota; a new
   * resumable upload of `subject` also within the bounds on unfinished uploads.
   */
  reserve(key: string, bytes: number, options: { readonly resumable: boolean; readonly deferred?: boolean; readonly subject?: string }): QuotaRefusal | undefined {
    const current = this.reservations.get(key)
    if (current === undefined && options.resumable) {
      let database = 0
      let mine = 0
      for (const [id, r] of this.reservations) {
        if (!r.resumable) continue
        database++
        if (options.subject !== undefined && isOwnedBy(id, options.subject)) mine++
      }
      if (mine >= this.bounds.unfinishedPerPrincipal) return { _tag: "TooManyUnfinished", per: "principal", limit: this.bounds.unfinishedPerPrincipal }
      if (database >= this.bounds.unfinishedPerDatabase) return { _tag: "TooManyUnfinished", per: "database", limit: this.bounds.unfinishedPerDatabase }
    }
    const held = current?.bytes ?? 0
    if (bytes > held && this.storedBytes + this.reservedBytes - held + bytes > this.bounds.quotaBytes) {
      return { _tag: "OverQuota", quotaBytes: this.bounds.quotaBytes }
    }
    this.reservedBytes += bytes - held
    if (current === undefined) this.reservations.set(key, { bytes, resumable: options.resumable, deferred: options.deferred ?? false })
    else {
      current.bytes = bytes
      if (options.deferred !== undefined) current.deferred = options.deferred
    }
    return undefined
  }

  /** Records what is on disk for `key` now (after a restart, or after a request on it), whatever the quota says. */
  restore(key: string, bytes: number, deferred: boolean): void {
    const held = this.reservations.get(key)?.bytes ?? 0
    this.reservedBytes += bytes - held
    this.reservations.set(key, { bytes, resumable: true, deferred })
  }

  /** Gives back what `key` held. */
  release(key: string): void {
    const current = this.reservations.get(key)
    if (current === undefined) return
    this.reservedBytes -= current.bytes
    this.reservations.delete(key)
  }

  /** The keys of unfinished resumable uploads. */
  resumableKeys(): ReadonlyArray<string> {
    return [...this.reservations].filter(([, r]) => r.resumable).map(([k]) => k)
  }

  /** `bytes` more are stored (a new blob), or fewer (a blob collected). */
  addStored(bytes: number): void {
    this.storedBytes = Math.max(0, this.storedBytes + bytes)
  }
}

/** The public sentence for a quota refusal: the limit and what to do, never the free bytes. */
export const overQuotaMessage = (quotaBytes: number) =>
  `This file does not fit in your database's file storage quota of ${quotaBytes} bytes, counting files stored and uploads not yet finished. Delete records holding files you no longer need, or cancel unfinished uploads.`

export const tooManyUnfinishedMessage = (refusal: Extract<QuotaRefusal, { _tag: "TooManyUnfinished" }>) =>
  refusal.per === "principal"
    ? `You have ${refusal.limit} unfinished resumable uploads, the most allowed at once. Finish or cancel (DELETE) one of them, then start this one.`
    : `This database has ${refusal.limit} unfinished resumable uploads, the most allowed at once. Finish or cancel one of them, then start this one.`

/**
 * The caches one database's hub holds for its streams: lookup answers per state, and replayed
 * commit ranges per kind of stream. They are fields of the hub (see `Hub.make`), so they go
 * when it goes; their bounds are about positions and kinds within the one database.
 */
import type { RecordValue } from "@cairn/policy/Evaluate"
import type { ReplayResult } from "./replay.js"
import { makeWide, type Wide } from "./rows.js"

/**
 * Lookup answers for one state (last committed position) of the database: every live stream
 * replays the same commit against the same state, so they share reads.
 */
export interface Shared {
  readonly answers: Map<string, ReadonlyArray<RecordValue>>
  readonly wide: Wide
  /** Unnarrowed lookups by (entity, field, value), for template kinds (see `Hub`'s `decideBySubject`); null: too many rows. */
  readonly every: Map<string, ReadonlyArray<RecordValue> | null>
}

/** The shared lookups of the database's state at `position`, made on first use. */
export const makeLookups = (): ((position: number) => Shared) => {
  const byPosition = new Map<number, Shared>()
  return (position) => {
    let cache = byPosition.get(position)
    if (!cache) {
      byPosition.set(position, (cache = { answers: new Map(), wide: makeWide(), every: new Map() }))
      // Keep only the newest few states: streams read the latest one, and an older state is
      // never read again once the database has committed past it (else this grows with every commit).
      for (const old of [...byPosition.keys()].sort((a, b) => a - b).slice(0, -4)) byPosition.delete(old)
    }
    return cache
  }
}

/**
 * A replayed commit range: the changes after one position up to `last`, for one catalog, scope
 * and access (a stream's view of the range is a function of exactly these and of the database's
 * state at `last`). The first stream of a kind to read a range after a commit replays it; the
 * others take its answer.
 */
export interface Replayed {
  readonly result: ReplayResult
  readonly newest: string | undefined
  /** The JSON text of the encoded changes, made once for every stream sent them directly. */
  encoded?: string
}

export interface Ranges {
  readonly recall: (range: string, kind: string) => Replayed | undefined
  readonly remember: (range: string, kind: string, value: Replayed) => void
}

/** The key of the range after `position` up to `last`. */
export const rangeKey = (position: number, last: number) => `${position}|${last}`

/**
 * Replayed ranges by range (`rangeKey`), then kind: a stream's kind key is one string made
 * once, so finding its group and its range's answer hashes no new text.
 */
export const makeRanges = (): Ranges => {
  const byRange = new Map<string, Map<string, Replayed>>()
  return {
    recall: (range, kind) => byRange.get(range)?.get(kind),
    remember: (range, kind, value) => {
      let byKind = byRange.get(range)
      if (!byKind) {
        byRange.set(range, (byKind = new Map()))
        // Bounded: the newest ranges (Map order is insertion order), as streams read ranges ending
        // near the tip, and the newest kinds of each (the kinds of streams one database serves at once).
        if (byRange.size > 16) byRange.delete(byRange.keys().next().value!)
      }
      if (byKind.size >= 4096) byKind.delete(byKind.keys().next().value!)
      byKind.set(kind, value)
    }
  }
}

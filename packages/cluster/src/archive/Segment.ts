/**
 * One shipped group commit of a database: its commits (full `_cairn_commits` rows, change images
 * included) and every receipt it decided (rejections too). It is the unit the archive stores, and the
 * unit a takeover's rebuild, a follower and a point-in-time restore apply, through the store's own
 * `Restore.replay` (each change's before image checked against the file it continues).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Catalog } from "@cairn/catalog/Catalog"
import { ArchiveFailed, CommitRecord, type Group, ReceiptRecord } from "@cairn/store/Archive"
import { type LogSource, replay } from "@cairn/store/Restore"

export const Segment = Schema.Struct({
  version: Schema.Literal(1),
  databaseId: Schema.String,
  /** The database's history: a restore starts a new one (and a new install id). */
  generation: Schema.Int,
  /** 1, 2, 3… within a generation, without gaps: the archive's order of groups. */
  seq: Schema.Int,
  /** Its commits are at positions `(from, to]`; `from === to` for a group that only rejected. */
  from: Schema.Int,
  to: Schema.Int,
  commits: Schema.Array(CommitRecord),
  receipts: Schema.Array(ReceiptRecord)
})
export type Segment = typeof Segment.Type

const SegmentJson = Schema.parseJson(Segment)
const encodeJson = Schema.encodeSync(SegmentJson)
const decodeJson = Schema.decodeUnknown(SegmentJson)

/** The segment of one group, numbered `seq` in `generation`. */
export const fromGroup = (databaseId: string, generation: number, seq: number, group: Group): Segment => ({
  version: 1,
  databaseId,
  generation,
  seq,
  from: group.from,
  to: group.to,
  commits: group.commits,
  receipts: group.receipts
})

/** Its stored bytes (UTF-8 JSON). */
export const encode = (segment: Segment): Uint8Array => new TextEncoder().encode(encodeJson(segment))

/** A segment from its stored bytes; bytes that do not decode are `diverged` (never cast). */
export const decode = (bytes: Uint8Array): Effect.Effect<Segment, ArchiveFailed> =>
  Effect.suspend(() => decodeJson(new TextDecoder().decode(bytes))).pipe(Effect.mapError((cause) => new ArchiveFailed({ reason: "diverged", cause })))

/**
 * Checks that `segments` continue one another from `position` (seqs consecutive, each starting where
 * the one before ended) and answers the position they end at.
 */
export const continuity = (segments: ReadonlyArray<Segment>, position: number): Effect.Effect<number, ArchiveFailed> =>
  Effect.suspend(() => {
    let at = position
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i]!
      const before = segments[i - 1]
      if (s.from !== at || s.to < s.from || (before !== undefined && s.seq !== before.seq + 1)) {
        return Effect.fail(new ArchiveFailed({ reason: "diverged", cause: new Error(`segment ${s.seq} does not continue position ${at}`) }))
      }
      at = s.to
    }
    return Effect.succeed(at)
  })

/**
 * Applies `segments` (in seq order, continuing the file at `position`) to `sql`, up to `through`
 * (default: their end): commits at positions `(position, through]`, each change's before image
 * checked, and the receipts decided before commit `through + 1` (rejections keep the position they
 * saw). Run it inside a transaction on the file; answers the position reached. A file the segments
 * do not continue is `diverged`, a storage failure `unavailable`.
 */
export const apply = (
  sql: SqlClient.SqlClient,
  catalog: Catalog,
  segments: ReadonlyArray<Segment>,
  position: number,
  through?: number
): Effect.Effect<number, ArchiveFailed> =>
  Effect.gen(function* () {
    const end = yield* continuity(segments, position)
    const target = through === undefined ? end : Math.min(through, end)
    const commits = segments.flatMap((s) => s.commits).filter((c) => c.position > position && c.position <= target)
    const source: LogSource<never> = {
      commits: ({ after, through }) => Effect.succeed(commits.filter((c) => c.position > after && c.position <= through)),
      receipts: () => Effect.succeed(segments.flatMap((s) => s.receipts).filter((r) => r.position <= target))
    }
    yield* replay(sql, source, catalog, position, target, null)
    return target
  }).pipe(
    Effect.catchTags({
      RestoreRefused: (cause) => Effect.fail(new ArchiveFailed({ reason: "diverged", cause })),
      ParseError: (cause) => Effect.fail(new ArchiveFailed({ reason: "diverged", cause })),
      SqlError: (cause) => Effect.fail(new ArchiveFailed({ reason: "unavailable", cause }))
    })
  )

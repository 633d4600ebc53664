/**
 * Turns a range of the commit log into what one principal may learn from it. Runs in
 * one read transaction, so "now" is one consistent state; the state at the range's
 * start is the same rows with the range's changes undone from their before images.
 *
 * Each record touched in the range is decided exactly: visible before (at the start)
 * and after (now) gives an upsert, a removal, or nothing. A record the range did not
 * touch can still change visibility when a row its policy reads through (a membership,
 * a parent) changed; those rows are found by walking the policy's lookups backwards,
 * and if any such record's visibility really changed the answer is a resnapshot.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { RowScope } from "@cairn/catalog"
import type { Catalog } from "@cairn/catalog/Catalog"
import type { Scalar } from "@cairn/domain/QueryDocument"
import type { SyncChange } from "@cairn/domain/Sync"
import { inScopeEffect, type LookupEffect, type RecordValue } from "@cairn/policy/Evaluate"
import { Effect } from "effect"
import { type Narrowing, norm, rows, type Wide } from "./rows.js"
import { entryFilter, type ResolvedScope, type ScopeEntry, strip } from "./scope.js"

/** One row-level change of a commit, as the log stores it. */
export interface LogChange {
  readonly entity: string
  readonly id: string
  readonly before: RecordValue | null
  readonly after: RecordValue | null
}

export interface LogCommit {
  readonly position: number
  readonly changes: ReadonlyArray<LogChange>
}

export type ReplayResult =
  | { readonly _tag: "Changes"; readonly changes: ReadonlyArray<SyncChange> }
  | { readonly _tag: "AccessChanged" }

/** A place where evaluating a record's scope reads other rows. */
interface Node {
  readonly kind: "root" | "hop" | "exists"
  readonly entity: string
  readonly parent: Node | undefined
  /** This node's rows relate to the parent's: `row[innerField] = parentRow[outerField]`. */
  readonly innerField: string
  readonly outerField: string
  /** `exists`: the condition a row must meet to count. */
  readonly where: RowScope.ScopeFilter | undefined
  /** `hop`: the fields of the reached row that evaluation goes on to read. */
  readonly reads: Set<string>
}

const node = (
  kind: Node["kind"],
  entity: string,
  parent: Node | undefined,
  innerField = "id",
  outerField = "id",
  where?: RowScope.ScopeFilter
): Node => ({ kind, entity, parent, innerField, outerField, where, reads: new Set() })

/** Every lookup site of `filter` evaluated over rows of `context`'s entity. */
const collect = (catalog: Catalog, filter: RowScope.ScopeFilter, context: Node, into: Array<Node>): void => {
  const walkPath = (path: ReadonlyArray<string>): { readonly at: Node; readonly field: string } => {
    let at = context
    for (const segment of path.slice(0, -1)) {
      // Paths in compiled policy resolve; relationship segments are all but the last.
      const rel = catalog.entity(at.entity)!.relationship(segment)!
      if (at.kind === "hop") at.reads.add(rel.via)
      const hop = node("hop", rel.target, at, "id", rel.via)
      into.push(hop)
      at = hop
    }
    const field = path[path.length - 1]!
    if (at.kind === "hop") at.reads.add(field)
    return { at, field }
  }
  switch (filter.op) {
    case "and":
    case "or":
      for (const f of filter.filters) collect(catalog, f, context, into)
      return
    case "not":
      collect(catalog, filter.filter, context, into)
      return
    case "exists": {
      const { at, field } = walkPath(filter.path)
      const ex = node("exists", filter.entity, at, filter.field, field, filter.where)
      into.push(ex)
      if (filter.where !== undefined) collect(catalog, filter.where, ex, into)
      return
    }
    default:
      walkPath(filter.path)
  }
}

/** The `eq` conjuncts over the row's own fields that `filter` requires. */
const required = (filter: RowScope.ScopeFilter | undefined): ReadonlyArray<readonly [string, Scalar]> => {
  if (filter === undefined) return []
  if (filter.op === "and") return filter.filters.flatMap(required)
  if (filter.op === "eq" && filter.path.length === 1 && filter.value !== null) return [[filter.path[0]!, filter.value]]
  return []
}

/**
 * For each (entity, field) the policy looks rows up by, the equalities every asker
 * requires of a row: `exists` clauses contribute their `where`'s `eq` conjuncts,
 * relationship hops (which need the row whatever it holds) none. Only equalities all
 * askers share may narrow the lookup.
 */
export const narrowingOf = (catalog: Catalog, scope: ResolvedScope): Narrowing => {
  const askers = new Map<string, Array<ReadonlyArray<readonly [string, Scalar]>>>()
  const ask = (entity: string, field: string, needs: ReadonlyArray<readonly [string, Scalar]>) => {
    const key = `${entity}\u0000${field}`
    askers.set(key, [...(askers.get(key) ?? []), needs])
  }
  for (const entry of scope.entries) {
    if (entry.rowScope._tag !== "Where") continue
    const nodes: Array<Node> = []
    collect(catalog, entry.rowScope.filter, node("root", entry.entity.name, undefined), nodes)
    for (const n of nodes) ask(n.entity, n.innerField, n.kind === "exists" ? required(n.where) : [])
  }
  const narrowed = new Map<string, ReadonlyArray<readonly [string, Scalar]>>()
  for (const [key, all] of askers) {
    const shared = all[0]!.filter(([f, v]) => all.every((needs) => needs.some(([g, w]) => g === f && norm(w) === norm(v))))
    if (shared.length > 0) narrowed.set(key, shared)
  }
  return (entity, field) => narrowed.get(`${entity}\u0000${field}`)
}

const sameVisible = (entry: ScopeEntry, a: RecordValue, b: RecordValue): boolean =>
  entry.fields.every((f) => norm(a[f.name]) === norm(b[f.name]))

interface Touched {
  first: RecordValue | null
  last: RecordValue | null
  position: number
}

export interface ReplayOptions {
  readonly catalog: Catalog
  readonly scope: ResolvedScope
  readonly reader: SqlClient.SqlClient
  readonly commits: ReadonlyArray<LogCommit>
  /** Records whose visibility may be re-checked before resnapshotting instead. */
  readonly maxDependents: number
  /** Lookup answers shared with other replays reading the same state. */
  readonly cache?: Map<string, ReadonlyArray<RecordValue>>
  /** Unnarrowed lookups shared with the other replays of the same state (see `Wide`). */
  readonly wide?: Wide
  /** From `narrowingOf(catalog, scope)`, computed once per stream. */
  readonly narrowing?: Narrowing
}

/** Every row the commits touched, by entity and id: its first before image and last after image. */
const touchedBy = (commits: ReadonlyArray<LogCommit>): Map<string, Map<string, Touched>> => {
  const touched = new Map<string, Map<string, Touched>>()
  for (const commit of commits) {
    for (const change of commit.changes) {
      let byId = touched.get(change.entity)
      if (!byId) touched.set(change.entity, (byId = new Map()))
      const seen = byId.get(change.id)
      if (seen) {
        seen.last = change.after
        seen.position = commit.position
      } else byId.set(change.id, { first: change.before, last: change.after, position: commit.position })
    }
  }
  return touched
}

/** Lookups at the start of the range: the current state with every touched row undone to its first before image. */
const lookupAtStart =
  (lookupNow: LookupEffect<SqlError.SqlError, never>, touched: Map<string, Map<string, Touched>>): LookupEffect<SqlError.SqlError, never> =>
  (entity, field, value) =>
    Effect.map(lookupNow(entity, field, value), (found) => {
      const changed = touched.get(entity)
      if (!changed) return found
      const wanted = norm(value)
      const kept = found.filter((r) => !changed.has(r["id"] as string))
      for (const t of changed.values()) if (t.first && norm(t.first[field]) === wanted) kept.push(t.first)
      return kept
    })

export interface StartState {
  /** Ids of the entry's entity that the commits touched: the current state of these rows is not the start's. */
  readonly touched: ReadonlySet<string>
  /** The start images of those touched rows the principal could see at the start. */
  readonly visible: ReadonlyArray<RecordValue>
}

/**
 * What the rows of one scope entry touched by `commits` (everything after a position up to
 * the reader's state) were at that position, as the principal saw them. A snapshot page read
 * after its snapshot's start sends these instead of their current state, so every page shows
 * the start: a replay from the snapshot's checkpoint (the start) then decides each record
 * against what the client really holds.
 */
export const stateAtStart = (options: {
  readonly catalog: Catalog
  readonly entry: ScopeEntry
  readonly reader: SqlClient.SqlClient
  readonly commits: ReadonlyArray<LogCommit>
  readonly narrowing?: Narrowing
  /** Only rows whose id this accepts are decided (a page covers a range of ids). */
  readonly covers?: (id: string) => boolean
}): Effect.Effect<StartState, SqlError.SqlError> =>
  Effect.gen(function* () {
    const { catalog, entry } = options
    const touched = touchedBy(options.commits)
    const changed = touched.get(entry.entity.name)
    if (!changed) return { touched: new Set(), visible: [] }
    const lookupStart = lookupAtStart(rows(catalog, options.reader, new Map(), options.narrowing).lookup, touched)
    const visible: Array<RecordValue> = []
    for (const [id, t] of changed) {
      if (options.covers !== undefined && !options.covers(id)) continue
      if (t.first && (yield* inScopeEffect(catalog, entry.entity.name, entryFilter(entry), t.first, lookupStart))) visible.push(t.first)
    }
    return { touched: new Set(changed.keys()), visible }
  })

export const replay = (options: ReplayOptions): Effect.Effect<ReplayResult, SqlError.SqlError> =>
  Effect.gen(function* () {
    const { catalog, scope, reader, commits } = options

    const touched = touchedBy(commits)

    // Reads of the current state, shared by every evaluation of this batch.
    const current = rows(catalog, reader, options.cache, options.narrowing, options.wide)
    const rowsWhere = current.where
    const lookupNow = current.lookup
    // The start of the range: undo every touched row to its first before image.
    const lookupStart = lookupAtStart(lookupNow, touched)

    const visible = (entry: ScopeEntry, record: RecordValue | null, lookup: LookupEffect<SqlError.SqlError, never>) =>
      record === null ? Effect.succeed(false) : inScopeEffect(catalog, entry.entity.name, entryFilter(entry), record, lookup)

    // 1. Does any record the range did not touch see its visibility change?
    const contribution = (n: Node, record: RecordValue | null, lookup: LookupEffect<SqlError.SqlError, never>) =>
      Effect.gen(function* () {
        if (record === null) return undefined
        if (n.kind === "hop") return { key: record[n.innerField] as Scalar, payload: norm([...n.reads].map((f) => record[f])) }
        const counts = n.where === undefined || (yield* inScopeEffect(catalog, n.entity, { _tag: "Where", filter: n.where }, record, lookup))
        return counts ? { key: record[n.innerField] as Scalar, payload: "" } : undefined
      })

    const deltaKeys = (
      n: Node,
      start: RecordValue | null,
      now: RecordValue | null,
      into: Map<string, Scalar>
    ) =>
      Effect.gen(function* () {
        const c0 = yield* contribution(n, start, lookupStart)
        const c1 = yield* contribution(n, now, lookupNow)
        if (c0 && c1 && norm(c0.key) === norm(c1.key) && c0.payload === c1.payload) return
        for (const c of [c0, c1]) if (c && c.key !== null && c.key !== undefined) into.set(norm(c.key), c.key)
      })

    let checked = 0
    class TooMany {}
    const tooMany = new TooMany()

    /** Walks from changed rows of `n` (their `innerField` values) up to the root; true when a root record changed visibility. */
    const affects = (n: Node, keys: Map<string, Scalar>, entry: ScopeEntry): Effect.Effect<boolean, SqlError.SqlError | TooMany> =>
      Effect.gen(function* () {
        const parent = n.parent!
        if (keys.size === 0) return false
        const found = yield* rowsWhere(parent.entity, n.outerField, [...keys.values()])
        const changed = touched.get(parent.entity)
        const candidates = new Map<string, { start: RecordValue | null; now: RecordValue | null }>()
        for (const row of found) {
          const t = changed?.get(row["id"] as string)
          candidates.set(row["id"] as string, { start: t ? t.first : row, now: row })
        }
        if (changed && parent.kind !== "root") {
          for (const [id, t] of changed) {
            if (t.first && keys.has(norm(t.first[n.outerField]))) candidates.set(id, { start: t.first, now: t.last })
          }
        }
        checked += candidates.size
        if (checked > options.maxDependents) return yield* Effect.fail(tooMany)
        if (parent.kind === "root") {
          for (const [id, c] of candidates) {
            // Touched records are decided exactly below.
            if (changed?.has(id)) continue
            const before = yield* visible(entry, c.start, lookupStart)
            const after = yield* visible(entry, c.now, lookupNow)
            if (before !== after) return true
          }
          return false
        }
        const next = new Map<string, Scalar>()
        for (const c of candidates.values()) {
          if (parent.kind === "hop") {
            for (const r of [c.start, c.now]) if (r) next.set(norm(r["id"]), r["id"] as Scalar)
          } else yield* deltaKeys(parent, c.start, c.now, next)
        }
        return yield* affects(parent, next, entry)
      })

    const accessChanged = Effect.gen(function* () {
      for (const entry of scope.entries) {
        if (entry.rowScope._tag !== "Where") continue
        const nodes: Array<Node> = []
        collect(catalog, entry.rowScope.filter, node("root", entry.entity.name, undefined), nodes)
        for (const n of nodes) {
          const changedRows = touched.get(n.entity)
          if (!changedRows) continue
          const keys = new Map<string, Scalar>()
          for (const t of changedRows.values()) yield* deltaKeys(n, t.first, t.last, keys)
          if (yield* affects(n, keys, entry)) return true
        }
      }
      return false
    }).pipe(Effect.catchIf((e): e is TooMany => e === tooMany, () => Effect.succeed(true)))

    if (yield* accessChanged) return { _tag: "AccessChanged" } as const

    // 2. Every touched record in scope, decided exactly, in the order of its last change.
    const decided: Array<{ readonly position: number; readonly change: SyncChange }> = []
    for (const entry of scope.entries) {
      const changedRows = touched.get(entry.entity.name)
      if (!changedRows || entry.rowScope._tag === "None") continue
      for (const [id, t] of changedRows) {
        const before = yield* visible(entry, t.first, lookupStart)
        const after = yield* visible(entry, t.last, lookupNow)
        if (after) {
          if (before && sameVisible(entry, t.first!, t.last!)) continue
          decided.push({ position: t.position, change: { _tag: "Upsert", entity: entry.entity.name, id, record: strip(entry, t.last!) } })
        } else if (before) {
          decided.push({ position: t.position, change: { _tag: "Remove", entity: entry.entity.name, id } })
        }
      }
    }
    decided.sort((a, b) => a.position - b.position)
    return { _tag: "Changes", changes: decided.map((d) => d.change) } as const
  })

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
import { type BySubject, forSubject, inScope, inScopeBySubject, inScopeEffect, type Lookup, type LookupEffect, type RecordValue } from "@cairn/policy/Evaluate"
import * as SubjectTemplate from "@cairn/policy/SubjectTemplate"
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

/** The lookup sites of a scope entry's row scope, collected once per entry (a stream resolves its scope once). */
const nodesOfEntry = new WeakMap<ScopeEntry, ReadonlyArray<Node>>()
const entryNodes = (catalog: Catalog, entry: ScopeEntry, filter: RowScope.ScopeFilter): ReadonlyArray<Node> => {
  let nodes = nodesOfEntry.get(entry)
  if (nodes === undefined) {
    const into: Array<Node> = []
    collect(catalog, filter, node("root", entry.entity.name, undefined), into)
    nodesOfEntry.set(entry, (nodes = into))
  }
  return nodes
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
  // By entity, then field: every lookup of every stream asks, so no key string is built per ask.
  const narrowed = new Map<string, Map<string, ReadonlyArray<readonly [string, Scalar]>>>()
  for (const [key, all] of askers) {
    const shared = all[0]!.filter(([f, v]) => all.every((needs) => needs.some(([g, w]) => g === f && norm(w) === norm(v))))
    if (shared.length === 0) continue
    const [entity, field] = key.split("\u0000") as [string, string]
    let byField = narrowed.get(entity)
    if (byField === undefined) narrowed.set(entity, (byField = new Map()))
    byField.set(field, shared)
  }
  return (entity, field) => narrowed.get(entity)?.get(field)
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

/**
 * Whether the row scopes of `scope` read rows other than the record's own (through
 * relationships or `exists`). Then a range is decided against the reader's state, which must
 * be the range's end: a range cut short of it cannot be replayed exactly.
 */
export const readsThrough = (scope: ResolvedScope): boolean =>
  scope.entries.some((entry) => entry.rowScope._tag === "Where" && readsOthers(entry.rowScope.filter))

/** Whether evaluating `filter` looks other rows up: a lookup site of `collect` (a relationship path or `exists`). */
const readsOthers = (filter: RowScope.ScopeFilter): boolean => {
  switch (filter.op) {
    case "and":
    case "or":
      return filter.filters.some(readsOthers)
    case "not":
      return readsOthers(filter.filter)
    case "exists":
      return true
    default:
      return filter.path.length > 1
  }
}

/** `touchedBy`, computed once per commit list (the hub's streams replay the same list; nothing mutates the answer). */
const touchedOf = new WeakMap<ReadonlyArray<LogCommit>, Map<string, Map<string, Touched>>>()
const touchedShared = (commits: ReadonlyArray<LogCommit>): Map<string, Map<string, Touched>> => {
  let touched = touchedOf.get(commits)
  if (touched === undefined) touchedOf.set(commits, (touched = touchedBy(commits)))
  return touched
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

/** A lookup's answer now, turned into its answer at the start of the range: every touched row undone to its first before image. */
const undoTouched = (
  found: ReadonlyArray<RecordValue>,
  touched: Map<string, Map<string, Touched>>,
  entity: string,
  field: string,
  value: unknown
): ReadonlyArray<RecordValue> => {
  const changed = touched.get(entity)
  if (!changed) return found
  const wanted = norm(value)
  const kept = found.filter((r) => !changed.has(r["id"] as string))
  for (const t of changed.values()) if (t.first && norm(t.first[field]) === wanted) kept.push(t.first)
  return kept
}

/** Lookups at the start of the range (see `undoTouched`). */
const lookupAtStart =
  (lookupNow: LookupEffect<SqlError.SqlError, never>, touched: Map<string, Map<string, Touched>>): LookupEffect<SqlError.SqlError, never> =>
  (entity, field, value) =>
    Effect.map(lookupNow(entity, field, value), (found) => undoTouched(found, touched, entity, field, value))

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

/** What the replay needs from the state: a scope decision (at the start or now), or rows by field. */
type Need =
  | { readonly _tag: "inScope"; readonly entity: string; readonly scope: RowScope.RowScope; readonly record: RecordValue; readonly start: boolean }
  | { readonly _tag: "where"; readonly entity: string; readonly field: string; readonly values: ReadonlyArray<Scalar> }
type Replaying<A> = Generator<Need, A, any>

function* inScopeAt(entity: string, scope: RowScope.RowScope, record: RecordValue, start: boolean): Replaying<boolean> {
  return (yield { _tag: "inScope", entity, scope, record, start }) as boolean
}
function* rowsWhereNeed(entity: string, field: string, values: ReadonlyArray<Scalar>): Replaying<ReadonlyArray<RecordValue>> {
  return (yield { _tag: "where", entity, field, values }) as ReadonlyArray<RecordValue>
}

/** The replay itself, asking for every read it needs (see the two runners below). */
function* replaying(catalog: Catalog, scope: ResolvedScope, touched: Map<string, Map<string, Touched>>, maxDependents: number): Replaying<ReplayResult> {
  const visible = function* (entry: ScopeEntry, record: RecordValue | null, start: boolean): Replaying<boolean> {
    return record === null ? false : yield* inScopeAt(entry.entity.name, entryFilter(entry), record, start)
  }

  // 1. Does any record the range did not touch see its visibility change?
  const contribution = function* (n: Node, record: RecordValue | null, start: boolean): Replaying<{ key: Scalar; payload: string } | undefined> {
    if (record === null) return undefined
    if (n.kind === "hop") return { key: record[n.innerField] as Scalar, payload: norm([...n.reads].map((f) => record[f])) }
    const counts = n.where === undefined || (yield* inScopeAt(n.entity, { _tag: "Where", filter: n.where }, record, start))
    return counts ? { key: record[n.innerField] as Scalar, payload: "" } : undefined
  }

  const deltaKeys = function* (n: Node, start: RecordValue | null, now: RecordValue | null, into: Map<string, Scalar>): Replaying<void> {
    const c0 = yield* contribution(n, start, true)
    const c1 = yield* contribution(n, now, false)
    if (c0 && c1 && norm(c0.key) === norm(c1.key) && c0.payload === c1.payload) return
    for (const c of [c0, c1]) if (c && c.key !== null && c.key !== undefined) into.set(norm(c.key), c.key)
  }

  let checked = 0
  class TooMany {}
  const tooMany = new TooMany()

  /** Walks from changed rows of `n` (their `innerField` values) up to the root; true when a root record changed visibility. */
  const affects = function* (n: Node, keys: Map<string, Scalar>, entry: ScopeEntry): Replaying<boolean> {
    const parent = n.parent!
    if (keys.size === 0) return false
    const found = yield* rowsWhereNeed(parent.entity, n.outerField, [...keys.values()])
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
    if (checked > maxDependents) throw tooMany
    if (parent.kind === "root") {
      for (const [id, c] of candidates) {
        // Touched records are decided exactly below.
        if (changed?.has(id)) continue
        const before = yield* visible(entry, c.start, true)
        const after = yield* visible(entry, c.now, false)
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
  }

  const accessChanged = function* (): Replaying<boolean> {
    try {
      for (const entry of scope.entries) {
        if (entry.rowScope._tag !== "Where") continue
        for (const n of entryNodes(catalog, entry, entry.rowScope.filter)) {
          const changedRows = touched.get(n.entity)
          if (!changedRows) continue
          const keys = new Map<string, Scalar>()
          for (const t of changedRows.values()) yield* deltaKeys(n, t.first, t.last, keys)
          if (yield* affects(n, keys, entry)) return true
        }
      }
      return false
    } catch (e) {
      if (e === tooMany) return true
      throw e
    }
  }

  if (yield* accessChanged()) return { _tag: "AccessChanged" } as const

  // 2. Every touched record in scope, decided exactly, in the order of its last change.
  const decided: Decided = []
  for (const entry of scope.entries) {
    const changedRows = touched.get(entry.entity.name)
    if (!changedRows || entry.rowScope._tag === "None") continue
    for (const [id, t] of changedRows) {
      decide(decided, entry, id, t, yield* visible(entry, t.first, true), yield* visible(entry, t.last, false))
    }
  }
  return inOrder(decided)
}

type Decided = Array<{ readonly position: number; readonly change: SyncChange }>

/**
 * What a touched record shows the streams of one entity and set of visible fields: whether
 * its visible fields changed, its upsert and its removal, each made once and shared by every
 * stream that sees the same fields (the hub's streams replay one commit list, whose touched
 * rows are shared; see `touchedShared`), so equal change lists hold the same change objects
 * and are encoded once (see `Sync`). Nothing mutates a change.
 */
interface Shown {
  same?: boolean
  upsert?: SyncChange
  remove?: SyncChange
}
const shownOf = new WeakMap<Touched, Map<string, Shown>>()
const fieldsKeyOf = new WeakMap<ScopeEntry, string>()
const shown = (entry: ScopeEntry, t: Touched): Shown => {
  let key = fieldsKeyOf.get(entry)
  if (key === undefined) fieldsKeyOf.set(entry, (key = [entry.entity.name, ...entry.fields.map((f) => f.name)].join("\u0000")))
  let byFields = shownOf.get(t)
  if (byFields === undefined) shownOf.set(t, (byFields = new Map()))
  let found = byFields.get(key)
  if (found === undefined) byFields.set(key, (found = {}))
  return found
}

/** A touched record's change for a stream, from whether it was visible at the range's start and is at its end. */
const decide = (decided: Decided, entry: ScopeEntry, id: string, t: Touched, before: boolean, after: boolean) => {
  if (!after && !before) return
  const s = shown(entry, t)
  if (after) {
    if (before && (s.same ??= sameVisible(entry, t.first!, t.last!))) return
    decided.push({ position: t.position, change: (s.upsert ??= { _tag: "Upsert", entity: entry.entity.name, id, record: strip(entry, t.last!) }) })
  } else {
    decided.push({ position: t.position, change: (s.remove ??= { _tag: "Remove", entity: entry.entity.name, id }) })
  }
}

/**
 * The fields of an entry's own rows that its filter (row scope and `where`) reads: compared
 * on their own, or as the first hop of a path, or the outer value of an `exists`. Undefined
 * when a path does not resolve (then nothing may be concluded from them).
 */
const rootReadsOf = new WeakMap<ScopeEntry, ReadonlyArray<string> | undefined>()
export const rootReads = (catalog: Catalog, entry: ScopeEntry): ReadonlyArray<string> | undefined => {
  if (rootReadsOf.has(entry)) return rootReadsOf.get(entry)
  const scope = entryFilter(entry)
  const fields = new Set<string>()
  const walk = (filter: RowScope.ScopeFilter): boolean => {
    switch (filter.op) {
      case "and":
      case "or":
        return filter.filters.every(walk)
      case "not":
        return walk(filter.filter)
      default: {
        // `exists`: its `where` reads the other entity's rows, not this one's.
        const first = filter.path[0]
        if (first === undefined) return false
        if (filter.path.length === 1) {
          fields.add(first)
          return true
        }
        const via = catalog.entity(entry.entity.name)?.relationship(first)?.via
        if (via === undefined) return false
        fields.add(via)
        return true
      }
    }
  }
  const reads = scope._tag !== "Where" ? [] : walk(scope.filter) ? [...fields] : undefined
  rootReadsOf.set(entry, reads)
  return reads
}

/** The decided changes in the order of each record's last change. */
const inOrder = (decided: Decided) => {
  decided.sort((a, b) => a.position - b.position)
  return { _tag: "Changes", changes: decided.map((d) => d.change) } as const
}

export const replay = (options: ReplayOptions): Effect.Effect<ReplayResult, SqlError.SqlError> =>
  Effect.suspend(() => {
    const { catalog, scope, reader, commits } = options
    const touched = touchedShared(commits)
    // Reads of the current state, shared by every evaluation of this batch.
    const current = rows(catalog, reader, options.cache, options.narrowing, options.wide)
    // The start of the range: undo every touched row to its first before image.
    const lookupStart = lookupAtStart(current.lookup, touched)
    const answer = (need: Need): Effect.Effect<unknown, SqlError.SqlError> =>
      need._tag === "where"
        ? current.where(need.entity, need.field, need.values)
        : inScopeEffect(catalog, need.entity, need.scope, need.record, need.start ? lookupStart : current.lookup)
    const run = replaying(catalog, scope, touched, options.maxDependents)
    const step = (input: unknown): Effect.Effect<ReplayResult, SqlError.SqlError> => {
      const next = run.next(input)
      return next.done ? Effect.succeed(next.value) : Effect.flatMap(answer(next.value), step)
    }
    return step(undefined)
  })

/** Thrown by a synchronous lookup that would need a statement. */
const miss = new (class Miss {})()

/**
 * `replay` without any statement, when every lookup it needs is already answered by the
 * shared cache (`peek`); undefined as soon as one is not (then run `replay`). The hub's
 * streams replay one commit against one state, so after the first few every answer is there.
 */
export const replaySync = (
  options: Omit<ReplayOptions, "reader"> & { readonly peek: Lookup | ((entity: string, field: string, value: Scalar) => ReadonlyArray<RecordValue> | undefined) }
): ReplayResult | undefined => {
  const { catalog, scope, commits } = options
  const touched = touchedShared(commits)
  const lookupNow: Lookup = (entity, field, value) => {
    const found = options.peek(entity, field, value)
    if (found === undefined) throw miss
    return found
  }
  const lookupStart: Lookup = (entity, field, value) => undoTouched(lookupNow(entity, field, value), touched, entity, field, value)
  try {
    const direct = decideDirectly(catalog, scope, touched, lookupNow, lookupStart)
    if (direct !== undefined) return direct
  } catch (e) {
    if (e === miss) return undefined
    throw e
  }
  const run = replaying(catalog, scope, touched, options.maxDependents)
  try {
    let next = run.next()
    while (!next.done) {
      const need = next.value
      if (need._tag === "where") return undefined
      next = run.next(inScope(catalog, need.entity, need.scope, need.record, need.start ? lookupStart : lookupNow))
    }
    return next.value
  } catch (e) {
    if (e === miss) return undefined
    throw e
  }
}

/** Whether the range touched a row some row scope of `scope` reads through (then untouched records may change visibility). */
const readsTouched = (catalog: Catalog, scope: ResolvedScope, touched: Map<string, Map<string, Touched>>): boolean => {
  for (const entry of scope.entries) {
    if (entry.rowScope._tag !== "Where") continue
    for (const n of entryNodes(catalog, entry, entry.rowScope.filter)) if (touched.has(n.entity)) return true
  }
  return false
}

/**
 * Each record the range touched, of an entity `scope` reads, decided by `inScopeOf` at the range's
 * start and now (`outside` where it did not exist), handed to `each` until it answers false (then
 * false). The rows read through are the same at the start and now (none was touched: see
 * `readsTouched`), so a record whose own read fields kept their values is decided as before.
 */
const eachTouched = <T>(
  catalog: Catalog,
  scope: ResolvedScope,
  touched: Map<string, Map<string, Touched>>,
  outside: T,
  inScopeOf: (entity: string, scope: RowScope.RowScope, record: RecordValue, lookup: Lookup) => T,
  lookupStart: Lookup,
  lookupNow: Lookup,
  each: (entry: ScopeEntry, id: string, t: Touched, before: T, after: T) => boolean | void
): boolean => {
  for (const entry of scope.entries) {
    const changedRows = touched.get(entry.entity.name)
    if (!changedRows || entry.rowScope._tag === "None") continue
    const filter = entryFilter(entry)
    const reads = rootReads(catalog, entry)
    for (const [id, t] of changedRows) {
      const before = t.first === null ? outside : inScopeOf(entry.entity.name, filter, t.first, lookupStart)
      const after =
        t.last === null
          ? outside
          : t.first !== null && reads !== undefined && reads.every((f) => norm(t.first![f]) === norm(t.last![f]))
            ? before
            : inScopeOf(entry.entity.name, filter, t.last, lookupNow)
      if (each(entry, id, t, before, after) === false) return false
    }
  }
  return true
}

/**
 * `replaying` without its generator, when no row the range touched is one the scope's policy
 * reads through (then no untouched record can change visibility, so step 1 answers no and
 * only the touched records are decided, exactly as step 2 does). Undefined otherwise.
 */
const decideDirectly = (
  catalog: Catalog,
  scope: ResolvedScope,
  touched: Map<string, Map<string, Touched>>,
  lookupNow: Lookup,
  lookupStart: Lookup
): ReplayResult | undefined => {
  if (readsTouched(catalog, scope, touched)) return undefined
  const decided: Decided = []
  const inScopeOf = (entity: string, filter: RowScope.RowScope, record: RecordValue, lookup: Lookup) => inScope(catalog, entity, filter, record, lookup)
  eachTouched(catalog, scope, touched, false, inScopeOf, lookupStart, lookupNow, (entry, id, t, before, after) => {
    decide(decided, entry, id, t, before, after)
  })
  return inOrder(decided)
}

/** What each subject of a template kind is sent of a range (see `replayBySubject`). */
export type BySubjectResult = (subject: string) => ReplayResult

/**
 * `decideDirectly` for every subject at once: `scope` is a template (`SubjectTemplate`) shared
 * by streams whose scopes differ only in their subject, and each touched record is decided
 * once for all of them (`inScopeBySubject`, over `lookup`'s rows of every subject). A subject
 * is then sent what its own scope would decide: the records' visibility at the start and now
 * for that subject, the same change objects for every subject that decides alike. Undefined
 * where `decideDirectly` is (a touched row is one the policy reads through) or where the
 * template cannot be decided per subject; then each stream is replayed on its own.
 */
export const replayBySubject = (catalog: Catalog, scope: ResolvedScope, commits: ReadonlyArray<LogCommit>, lookupNow: Lookup): BySubjectResult | undefined => {
  const touched = touchedShared(commits)
  if (readsTouched(catalog, scope, touched)) return undefined
  const lookupStart: Lookup = (entity, field, value) => undoTouched(lookupNow(entity, field, value), touched, entity, field, value)
  const never: BySubject<boolean> = { otherwise: false, only: new Map() }
  const records: Array<{ readonly entry: ScopeEntry; readonly id: string; readonly t: Touched; readonly before: BySubject<boolean>; readonly after: BySubject<boolean> }> = []
  /** Subjects some record decides apart from the rest. */
  const apart = new Set<string>()
  const complete = eachTouched<BySubject<boolean> | undefined>(
    catalog,
    scope,
    touched,
    never,
    (entity, filter, record, lookup) => inScopeBySubject(catalog, entity, filter, record, SubjectTemplate.parameter, lookup),
    lookupStart,
    lookupNow,
    (entry, id, t, before, after) => {
      if (before === undefined || after === undefined) return false
      for (const s of before.only.keys()) apart.add(s)
      for (const s of after.only.keys()) apart.add(s)
      records.push({ entry, id, t, before, after })
      return true
    }
  )
  if (!complete) return undefined
  const decideFor = (subject: string | undefined) => {
    const decided: Decided = []
    for (const r of records) {
      const at = <T>(b: BySubject<T>) => (subject === undefined ? b.otherwise : forSubject(b, subject))
      decide(decided, r.entry, r.id, r.t, at(r.before), at(r.after))
    }
    return inOrder(decided)
  }
  // One answer for every subject no record sets apart, one per distinct set of decisions of the others.
  const common = decideFor(undefined)
  const byDecisions = new Map<string, ReplayResult>()
  return (subject) => {
    if (!apart.has(subject)) return common
    let key = ""
    for (const r of records) key += `${forSubject(r.before, subject) ? 1 : 0}${forSubject(r.after, subject) ? 1 : 0}`
    let found = byDecisions.get(key)
    if (found === undefined) byDecisions.set(key, (found = decideFor(subject)))
    return found
  }
}

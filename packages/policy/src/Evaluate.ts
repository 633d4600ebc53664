/**
 * In-memory evaluation of a `ScopeFilter` over one record (and of a `MutationRule` over
 * one invocation), for sync's change filtering, a writer's mutation guard, and as the
 * oracle of the SQL scope compiler. It follows SQLite's semantics for the SQL
 * a filter naturally compiles to: three-valued logic (a comparison with NULL is
 * unknown, and an unknown row does not qualify), cross-type ordering numbers < text,
 * text compared bytewise as UTF-8, booleans as 0/1, and case-sensitive
 * `startsWith`/`contains`.
 */
import { Effect } from "effect"
import { type RowScope, ValueOrder } from "@cairn/catalog"
import { type Catalog } from "@cairn/catalog/Catalog"
import type { ComparisonOp, Scalar } from "@cairn/domain/QueryDocument"
import { resolvePath } from "./internal/paths.js"
import type { MutationRule } from "./MutationRule.js"

/** A record in its plain JSON form: `id` plus fields; an absent optional field is null. */
export type RecordValue = Readonly<Record<string, unknown>>

/**
 * Rows of `entity` whose `field` (or `id`) equals `value`. Relationship paths and
 * `exists` read through it; it sees every row, since policy filters are trusted.
 */
export type Lookup = (entity: string, field: string, value: Scalar) => ReadonlyArray<RecordValue>

/** `Lookup` as an Effect, for callers that read inside a transaction. */
export type LookupEffect<E, R> = (entity: string, field: string, value: Scalar) => Effect.Effect<ReadonlyArray<RecordValue>, E, R>

type Truth = boolean | null

/** Values as SQLite stores and orders them (booleans 0/1, text by UTF-8 bytes), as the SQL filters do. */
const normalize = ValueOrder.toStored
const order = ValueOrder.compare

const not3 = (t: Truth): Truth => (t === null ? null : !t)

/** One lookup the evaluation needs; the driver answers it synchronously or as an Effect. */
interface Need {
  readonly entity: string
  readonly field: string
  readonly value: Scalar
}
type Eval<A> = Generator<Need, A, ReadonlyArray<RecordValue>>

/**
 * `resolvePath`, once per catalog, path and entity: a path of a compiled filter is one
 * array evaluated for every record (sync decides each change for every live stream).
 */
const resolvedPaths = new WeakMap<Catalog, WeakMap<ReadonlyArray<string>, Map<string, ReturnType<typeof resolvePath>>>>()
const pathOf = (catalog: Catalog, entity: string, path: ReadonlyArray<string>): ReturnType<typeof resolvePath> => {
  let byPath = resolvedPaths.get(catalog)
  if (byPath === undefined) resolvedPaths.set(catalog, (byPath = new WeakMap()))
  let byEntity = byPath.get(path)
  if (byEntity === undefined) byPath.set(path, (byEntity = new Map()))
  let found = byEntity.get(entity)
  if (found === undefined) byEntity.set(entity, (found = resolvePath(catalog, entity, path)))
  return found
}

function* valueAt(catalog: Catalog, entity: string, path: ReadonlyArray<string>, record: RecordValue): Eval<unknown> {
  const resolved = pathOf(catalog, entity, path)
  // Scope filters come from compiled policy, whose paths were checked against this catalog.
  if (typeof resolved === "string") throw new Error(`scope filter over ${entity}: ${resolved}`)
  let current: RecordValue | undefined = record
  for (const hop of resolved.hops) {
    const id: unknown = current[hop.via]
    if (typeof id !== "string") return null
    current = (yield { entity: hop.target, field: "id", value: id })[0]
    if (current === undefined) return null
  }
  return current[resolved.field.name]
}

function* evaluate3(catalog: Catalog, entity: string, filter: RowScope.ScopeFilter, record: RecordValue): Eval<Truth> {
  switch (filter.op) {
    case "and": {
      let result: Truth = true
      for (const f of filter.filters) {
        const t = yield* evaluate3(catalog, entity, f, record)
        if (t === false) return false
        if (t === null) result = null
      }
      return result
    }
    case "or": {
      let result: Truth = false
      for (const f of filter.filters) {
        const t = yield* evaluate3(catalog, entity, f, record)
        if (t === true) return true
        if (t === null) result = null
      }
      return result
    }
    case "not":
      return not3(yield* evaluate3(catalog, entity, filter.filter, record))
    case "isNull":
      return normalize(yield* valueAt(catalog, entity, filter.path, record)) === null
    case "exists": {
      const raw = yield* valueAt(catalog, entity, filter.path, record)
      const outer = normalize(raw)
      if (outer === null) return false
      const rows = yield { entity: filter.entity, field: filter.field, value: raw as Scalar }
      for (const row of rows) {
        if (normalize(row[filter.field]) !== outer) continue
        if (filter.where === undefined || (yield* evaluate3(catalog, filter.entity, filter.where, row)) === true) return true
      }
      return false
    }
    case "in":
    case "notIn": {
      // SQLite: `x IN ()` is false and `x NOT IN ()` true, even when x is NULL.
      if (filter.value.length === 0) return filter.op === "notIn"
      return membership3(filter.op, normalize(yield* valueAt(catalog, entity, filter.path, record)), filter.value.map(normalize))
    }
    default:
      return compare3(filter.op, normalize(yield* valueAt(catalog, entity, filter.path, record)), normalize(filter.value))
  }
}

/** `v in values` (or `notIn`) over stored values, `values` not empty. */
const membership3 = (op: "in" | "notIn", v: ValueOrder.Stored, values: ReadonlyArray<ValueOrder.Stored>): Truth => {
  if (v === null) return null
  const found: Truth = values.some((w) => w !== null && order(v, w) === 0) ? true : values.includes(null) ? null : false
  return op === "in" ? found : not3(found)
}

/** `v op w` over stored values. */
const compare3 = (op: ComparisonOp, v: ValueOrder.Stored, w: ValueOrder.Stored): Truth => {
  if (v === null || w === null) return null
  switch (op) {
    case "eq":
      return order(v, w) === 0
    case "ne":
      return order(v, w) !== 0
    case "lt":
      return order(v, w) < 0
    case "lte":
      return order(v, w) <= 0
    case "gt":
      return order(v, w) > 0
    case "gte":
      return order(v, w) >= 0
    case "startsWith":
      return typeof v === "string" && typeof w === "string" && v.startsWith(w)
    case "contains":
      return typeof v === "string" && typeof w === "string" && v.includes(w)
  }
}

const runSync = <A>(gen: Eval<A>, lookup: Lookup): A => {
  let step = gen.next()
  while (!step.done) step = gen.next(lookup(step.value.entity, step.value.field, step.value.value))
  return step.value
}

const runEffect = <A, E, R>(gen: Eval<A>, lookup: LookupEffect<E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const loop = (step: IteratorResult<Need, A>): Effect.Effect<A, E, R> =>
      step.done
        ? Effect.succeed(step.value)
        : Effect.flatMap(lookup(step.value.entity, step.value.field, step.value.value), (rows) => loop(gen.next(rows)))
    return loop(gen.next())
  })

function* scopeGen(catalog: Catalog, entity: string, scope: RowScope.RowScope, record: RecordValue): Eval<boolean> {
  if (scope._tag !== "Where") return scope._tag === "All"
  return (yield* evaluate3(catalog, entity, scope.filter, record)) === true
}

function* permitsGen(catalog: Catalog, owner: string, rule: MutationRule, request: MutationRequest): Eval<boolean> {
  if (rule._tag === "Deny") return false
  if (rule.target !== undefined) {
    if (request.target === undefined || !(yield* scopeGen(catalog, owner, rule.target, request.target))) return false
  }
  const input = (typeof request.input === "object" && request.input !== null ? request.input : {}) as RecordValue
  for (const reference of rule.references) {
    const id = input[reference.inputField]
    if (id === undefined || id === null) continue
    if (typeof id !== "string") return false
    const row = (yield { entity: reference.entity, field: "id", value: id })[0]
    if (row === undefined || !(yield* scopeGen(catalog, reference.entity, reference.scope, row))) return false
  }
  return true
}

/** Whether `record` of `entity` satisfies `filter` (unknown counts as not). */
export const evaluate = (
  catalog: Catalog,
  entity: string,
  filter: RowScope.ScopeFilter,
  record: RecordValue,
  lookup: Lookup
): boolean => runSync(evaluate3(catalog, entity, filter, record), lookup) === true

/** Whether `record` of `entity` lies in `scope`. */
export const inScope = (catalog: Catalog, entity: string, scope: RowScope.RowScope, record: RecordValue, lookup: Lookup): boolean =>
  runSync(scopeGen(catalog, entity, scope, record), lookup)

/** `inScope` over an effectful lookup, e.g. the writer's transaction reads. */
export const inScopeEffect = <E, R>(
  catalog: Catalog,
  entity: string,
  scope: RowScope.RowScope,
  record: RecordValue,
  lookup: LookupEffect<E, R>
): Effect.Effect<boolean, E, R> => runEffect(scopeGen(catalog, entity, scope, record), lookup)

/** The target (as stored) and input of one invocation, as a mutation rule checks them. */
export interface MutationRequest {
  readonly target?: RecordValue
  readonly input: unknown
}

/**
 * Whether a mutation rule permits an invocation of an operation owned by `owner`: not
 * denied, the target in its scope, and every id the input holds in its reference's scope.
 */
export const permits = (catalog: Catalog, owner: string, rule: MutationRule, request: MutationRequest, lookup: Lookup): boolean =>
  runSync(permitsGen(catalog, owner, rule, request), lookup)

/** `permits` over an effectful lookup: what a writer's mutation guard calls inside its transaction. */
export const permitsEffect = <E, R>(
  catalog: Catalog,
  owner: string,
  rule: MutationRule,
  request: MutationRequest,
  lookup: LookupEffect<E, R>
): Effect.Effect<boolean, E, R> => runEffect(permitsGen(catalog, owner, rule, request), lookup)

/**
 * A filter's truth for every subject at once, when the filter compares fields with a
 * parameter standing for the subject (see `SubjectTemplate`): `otherwise` for every subject
 * but those in `only`, which hold their own truth.
 */
export interface BySubject<T = Truth> {
  readonly otherwise: T
  readonly only: ReadonlyMap<string, T>
}
const noSubjects: ReadonlyMap<string, never> = new Map<string, never>()
const constant = <T>(t: T): BySubject<T> => ({ otherwise: t, only: noSubjects })
/** The truth of `t` for `subject`. */
export const forSubject = <T>(t: BySubject<T>, subject: string): T => {
  const own = t.only.get(subject)
  return own === undefined ? t.otherwise : own
}
/** `f` of two per-subject truths, subject by subject. */
const combine = <A, B, C>(a: BySubject<A>, b: BySubject<B>, f: (a: A, b: B) => C): BySubject<C> => {
  if (a.only.size === 0 && b.only.size === 0) return constant(f(a.otherwise, b.otherwise))
  const only = new Map<string, C>()
  for (const s of a.only.keys()) only.set(s, f(forSubject(a, s), forSubject(b, s)))
  for (const s of b.only.keys()) if (!only.has(s)) only.set(s, f(forSubject(a, s), forSubject(b, s)))
  return { otherwise: f(a.otherwise, b.otherwise), only }
}
const and3 = (a: Truth, b: Truth): Truth => (a === false || b === false ? false : a === null || b === null ? null : true)
const or3 = (a: Truth, b: Truth): Truth => (a === true || b === true ? true : a === null || b === null ? null : false)
/** `t` is `value` for every subject. */
const settled = (t: BySubject, value: Truth) => {
  if (t.otherwise !== value) return false
  for (const v of t.only.values()) if (v !== value) return false
  return true
}
/** Text that compares as itself only (no lone surrogate, which compares as U+FFFD): equal under `order` exactly when `===`. */
const exactText = (v: ValueOrder.Stored): v is string => typeof v === "string" && !/\p{Cs}/u.test(v)

/** Thrown where the parameter's truth per subject is not a finite exception list (e.g. an ordering against it). */
class NotBySubject {}
const notBySubject = new NotBySubject()

/** `evaluate3` with `parameter` standing for the subject: the truth of the filter for each subject. */
function* evaluateBySubject(catalog: Catalog, entity: string, filter: RowScope.ScopeFilter, record: RecordValue, parameter: string): Eval<BySubject> {
  switch (filter.op) {
    case "and":
    case "or": {
      const join = filter.op === "and" ? and3 : or3
      // The value that decides the connective for every subject, whatever comes next.
      const decisive = filter.op === "or"
      let result: BySubject = constant(!decisive)
      for (const f of filter.filters) {
        result = combine(result, yield* evaluateBySubject(catalog, entity, f, record, parameter), join)
        if (settled(result, decisive)) return result
      }
      return result
    }
    case "not": {
      const t = yield* evaluateBySubject(catalog, entity, filter.filter, record, parameter)
      return combine(t, constant(null), not3)
    }
    case "exists": {
      const raw = yield* valueAt(catalog, entity, filter.path, record)
      const outer = normalize(raw)
      if (outer === null) return constant(false)
      const rows = yield { entity: filter.entity, field: filter.field, value: raw as Scalar }
      // Some row counts for a subject when its `where` is true for that subject. Rows true for
      // every subject but a few (`forMost`) and rows true for a few only (`trueFor`), gathered in
      // time linear in the exceptions (each member's row of a project is true for its subject).
      const forMost: Array<BySubject> = []
      const trueFor = new Set<string>()
      for (const row of rows) {
        if (normalize(row[filter.field]) !== outer) continue
        if (filter.where === undefined) return constant(true)
        const t = yield* evaluateBySubject(catalog, filter.entity, filter.where, row, parameter)
        if (t.otherwise === true) {
          if (t.only.size === 0) return constant(true)
          forMost.push(t)
        } else for (const [s, v] of t.only) if (v === true) trueFor.add(s)
      }
      const only = new Map<string, Truth>()
      if (forMost.length === 0) {
        for (const s of trueFor) only.set(s, true)
        return { otherwise: false, only }
      }
      // A subject excepted by every row of `forMost` (and true for no other row) finds none.
      const excepted = new Map<string, number>()
      for (const t of forMost) for (const [s, v] of t.only) if (v !== true && !trueFor.has(s)) excepted.set(s, (excepted.get(s) ?? 0) + 1)
      for (const [s, n] of excepted) if (n === forMost.length) only.set(s, false)
      return { otherwise: true, only }
    }
    case "isNull":
      return constant(normalize(yield* valueAt(catalog, entity, filter.path, record)) === null)
    case "in":
    case "notIn": {
      if (filter.value.length === 0) return constant(filter.op === "notIn")
      const v = normalize(yield* valueAt(catalog, entity, filter.path, record))
      const values = filter.value.map(normalize)
      if (!values.includes(parameter)) return constant(membership3(filter.op, v, values))
      const others = values.filter((w) => w !== parameter)
      // Every subject but `v` itself matches none, so only the other values count (none: not found).
      const otherwise = membership3(filter.op, v, others)
      if (v === null || typeof v === "number") return constant(otherwise)
      if (!exactText(v)) throw notBySubject
      return { otherwise, only: new Map([[v, membership3(filter.op, v, [v])]]) }
    }
    default: {
      const v = normalize(yield* valueAt(catalog, entity, filter.path, record))
      const w = normalize(filter.value)
      if (w !== parameter) return constant(compare3(filter.op, v, w))
      if (filter.op !== "eq" && filter.op !== "ne") throw notBySubject
      if (v === null || typeof v === "number") return constant(compare3(filter.op, v, w))
      if (!exactText(v)) throw notBySubject
      return { otherwise: filter.op === "ne", only: new Map([[v, filter.op === "eq"]]) }
    }
  }
}

/**
 * Whether `record` lies in `scope` for each subject, where `scope` compares fields with
 * `parameter` in place of the subject: `inScope` of the scope with the parameter replaced by
 * a subject is `forSubject` of this for that subject (the parameter must not be a subject).
 * Undefined when the scope uses the parameter other than by equality (`eq`, `ne`, `in`,
 * `notIn`). `lookup` must answer every row (the rows of every subject).
 */
export const inScopeBySubject = (
  catalog: Catalog,
  entity: string,
  scope: RowScope.RowScope,
  record: RecordValue,
  parameter: string,
  lookup: Lookup
): BySubject<boolean> | undefined => {
  if (scope._tag !== "Where") return constant(scope._tag === "All")
  try {
    return combine(runSync(evaluateBySubject(catalog, entity, scope.filter, record, parameter), lookup), constant(null), (t) => t === true)
  } catch (e) {
    if (e === notBySubject) return undefined
    throw e
  }
}

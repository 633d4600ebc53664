/**
 * The parameterized plan cache. A plan and its statement depend on the document's shape
 * (entity, select, order, page size, whether a cursor continues it, the filter's structure
 * and operators) and on the view's policy class (what the principal sees and the structure
 * of their row scopes), never on the literal values: those are bound at execution. So an
 * entry is keyed by both with every value replaced by a placeholder, and a request with new
 * values, a new principal object or another subject of the same class reuses it.
 *
 * Behaviour is the planner's exactly: a document is planned (validated) the ordinary way
 * the first time its key is seen, and a later document of that key is only checked for
 * what its values can change (each comparison's values against its field); anything the
 * cheap checks are unsure about takes the ordinary path, which answers the same errors.
 */
import type { Catalog } from "@cairn/catalog/Catalog"
import { leafProblems } from "@cairn/catalog/ColumnValue"
import { canonicalJson, digest } from "@cairn/catalog/Digest"
import * as RowScope from "@cairn/catalog/RowScope"
import { View } from "@cairn/catalog/View"
import type { Comparison, Filter, IsNull, QueryDocumentV1, SetMembership } from "@cairn/domain/QueryDocument"
import type { QueryLimitsShape } from "../QueryLimits.js"
import { type FieldInfo, leafFields, type Plan, reading } from "./plan.js"
import type * as S from "./sql.js"
import { pageStatement } from "./statement.js"

/** Where a bound value comes from. */
const CONSTANT = 0
const DOCUMENT = 1
const SCOPE = 2
const CURSOR = 3

/** A placeholder the statement builder carries where a value goes; it becomes a slot. */
class Mark {
  constructor(
    readonly source: typeof DOCUMENT | typeof SCOPE | typeof CURSOR,
    readonly index: number
  ) {}
}

type Leaf = Comparison | SetMembership | IsNull

/** A document's shape key, its filter's values (pre-order) and the leaves they sit in. */
export interface Shape {
  readonly key: string
  readonly values: ReadonlyArray<unknown>
  readonly leaves: ReadonlyArray<Leaf>
}

const isPlain = (u: unknown): u is Record<string, unknown> => {
  if (typeof u !== "object" || u === null || Array.isArray(u)) return false
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

const isScalar = (u: unknown): boolean =>
  u === null || typeof u === "string" || typeof u === "boolean" || (typeof u === "number" && Number.isFinite(u))

const comparisons = new Set(["eq", "ne", "lt", "lte", "gt", "gte", "startsWith", "contains"])

/**
 * A path's part of a key, written out segment by segment (never `JSON.stringify` of the
 * array, which would honour a `toJSON` of a document built in code); `undefined` if it is
 * not an array of strings.
 */
const pathKey = (u: unknown): string | undefined => {
  if (!Array.isArray(u)) return undefined
  let key = "["
  for (let i = 0; i < u.length; i++) {
    const segment: unknown = u[i]
    if (typeof segment !== "string") return undefined
    key += (i === 0 ? "" : ",") + JSON.stringify(segment)
  }
  return `${key}]`
}

const keyCount = (o: object): number => {
  let n = 0
  for (const k in o) if (Object.hasOwn(o, k)) n++
  return n
}

/**
 * The document's shape, or `undefined` when anything about it is unusual (the ordinary
 * path then judges it). Iterative and bounded by `maxNodes`, like the filter check.
 */
export const shapeOf = (doc: QueryDocumentV1, maxNodes: number): Shape | undefined => {
  try {
    const d = doc as unknown as Record<string, unknown>
    if (!isPlain(d) || !isPlain(d["from"]) || typeof d["from"]["name"] !== "string") return undefined
    const select = d["select"]
    if (!isPlain(select)) return undefined
    const selected: Array<string> = []
    for (const name in select) {
      const s = select[name]
      // Exactly `{ path }`: the cursor fingerprint of a cached plan reuses its select's JSON.
      const path = isPlain(s) && keyCount(s) === 1 ? pathKey(s["path"]) : undefined
      if (path === undefined) return undefined
      selected.push(JSON.stringify(name), path)
    }
    const order = d["order"]
    const ordered: Array<string> = []
    if (order !== undefined) {
      if (!Array.isArray(order)) return undefined
      for (const term of order) {
        const path = isPlain(term) && keyCount(term) === 2 ? pathKey(term["path"]) : undefined
        if (path === undefined || typeof term["direction"] !== "string") return undefined
        ordered.push(path, term["direction"])
      }
    }
    const page = d["page"]
    if (page !== undefined && !isPlain(page)) return undefined
    const first = page === undefined ? undefined : page["first"]
    // A page size is a whole number when a document is decoded; anything else is judged the ordinary way.
    if (first !== undefined && !Number.isSafeInteger(first)) return undefined
    const after = page !== undefined && page["after"] !== undefined

    const parts: Array<string> = []
    const values: Array<unknown> = []
    const leaves: Array<Leaf> = []
    if (d["where"] !== undefined) {
      const stack: Array<unknown> = [d["where"]]
      let nodes = 0
      while (stack.length > 0) {
        const node = stack.pop()
        if (++nodes > maxNodes || !isPlain(node)) return undefined
        const op = node["op"]
        const size = keyCount(node)
        if (op === "and" || op === "or") {
          const filters = node["filters"]
          if (size !== 2 || !Array.isArray(filters)) return undefined
          parts.push(`${op}${filters.length}`)
          for (let i = filters.length - 1; i >= 0; i--) stack.push(filters[i])
        } else if (op === "not") {
          if (size !== 2 || !Object.hasOwn(node, "filter")) return undefined
          parts.push("not")
          stack.push(node["filter"])
        } else if (op === "isNull") {
          const path = pathKey(node["path"])
          if (size !== 2 || path === undefined) return undefined
          parts.push(`isNull${path}`)
          leaves.push(node as unknown as Leaf)
        } else if (op === "in" || op === "notIn") {
          const list = node["value"]
          const path = pathKey(node["path"])
          if (size !== 3 || path === undefined || !Array.isArray(list)) return undefined
          for (let i = 0; i < list.length; i++) {
            if (!isScalar(list[i])) return undefined
            values.push(list[i])
          }
          parts.push(`${op}${path}${list.length}`)
          leaves.push(node as unknown as Leaf)
        } else if (typeof op === "string" && comparisons.has(op)) {
          const path = pathKey(node["path"])
          if (size !== 3 || path === undefined || !Object.hasOwn(node, "value") || !isScalar(node["value"])) return undefined
          values.push(node["value"])
          parts.push(`${op}${path}`)
          leaves.push(node as unknown as Leaf)
        } else return undefined
      }
    }
    const key = JSON.stringify([d["from"]["name"], selected, order === undefined ? null : ordered, first ?? null, after, parts])
    return { key, values, leaves }
  } catch {
    // A getter that throws, a BigInt, a cycle: not a document to cache.
    return undefined
  }
}

/** `where` with each value replaced by a mark, in the order `shapeOf` collects them. */
const markFilter = (filter: Filter, next: () => Mark): Filter => {
  switch (filter.op) {
    case "and":
    case "or":
      return { op: filter.op, filters: filter.filters.map((f) => markFilter(f, next)) }
    case "not":
      return { op: "not", filter: markFilter(filter.filter, next) }
    case "isNull":
      return filter
    case "in":
    case "notIn":
      return { op: filter.op, path: filter.path, value: filter.value.map(() => next() as never) }
    default:
      return { op: filter.op, path: filter.path, value: next() as never }
  }
}

/** A view's policy class: its key, the values of its row scopes, and a view whose scopes hold marks. */
export interface ViewClass {
  /** A number per distinct class: what plans are cached under. */
  readonly id: number
  /** Digest of everything the class is made of. */
  readonly key: string
  readonly token: string
  readonly values: ReadonlyArray<unknown>
  readonly marked: View
}

/** A row scope's structure (values left out, pushed to `values`) and the scope with marks in their place. */
const scopeShape = (filter: RowScope.ScopeFilter, values: Array<unknown>): readonly [string, RowScope.ScopeFilter] => {
  const mark = (v: unknown) => {
    values.push(v)
    return new Mark(SCOPE, values.length - 1) as never
  }
  switch (filter.op) {
    case "and":
    case "or": {
      const children = filter.filters.map((f) => scopeShape(f, values))
      return [`${filter.op}(${children.map((c) => c[0]).join(",")})`, { op: filter.op, filters: children.map((c) => c[1]) }]
    }
    case "not": {
      const [shape, marked] = scopeShape(filter.filter, values)
      return [`not(${shape})`, { op: "not", filter: marked }]
    }
    case "exists": {
      const inner = filter.where === undefined ? undefined : scopeShape(filter.where, values)
      return [
        `exists(${JSON.stringify([filter.entity, filter.field, filter.path])}${inner === undefined ? "" : `,${inner[0]}`})`,
        inner === undefined ? filter : { ...filter, where: inner[1] }
      ]
    }
    case "isNull":
      return [`isNull${JSON.stringify(filter.path)}`, filter]
    case "in":
    case "notIn": {
      if (!Array.isArray(filter.value)) throw new Error("unusual scope")
      return [`${filter.op}${JSON.stringify(filter.path)}${filter.value.length}`, { ...filter, value: filter.value.map(mark) }]
    }
    default:
      if (!comparisons.has(filter.op)) throw new Error("unusual scope")
      return [`${filter.op}${JSON.stringify(filter.path)}`, { ...filter, value: mark(filter.value) }]
  }
}

const classes = new WeakMap<View, ViewClass | null>()

const classIds = new Map<string, number>()
const CLASS_IDS = 4096
let nextClassId = 0

/** A number per catalog object: plans hold its compiled definitions, so they are never shared across catalogs. */
const catalogIds = new WeakMap<Catalog, number>()
let nextCatalogId = 0
const catalogId = (catalog: Catalog): number => {
  let id = catalogIds.get(catalog)
  if (id === undefined) catalogIds.set(catalog, (id = nextCatalogId++))
  return id
}

/**
 * The view's policy class: what a plan's validation and statement depend on. The token,
 * which entities and fields are visible, and each visible entity's row scope with its
 * values (the principal's subject, claims ...) as placeholders. Memoized per view.
 */
export const classOf = (view: View): ViewClass | undefined => {
  const known = classes.get(view)
  if (known !== undefined) return known ?? undefined
  let found: ViewClass | null
  try {
    const token = view.token
    const parts: Array<unknown> = [catalogId(view.catalog), token]
    const values: Array<unknown> = []
    const scopes = new Map<string, RowScope.RowScope>()
    for (const entity of view.catalog.entities) {
      if (!view.entity(entity.name)) continue
      const hidden = entity.fields.filter((f) => !view.field(entity.name, f.name)).map((f) => f.name)
      const scope = view.rowScope(entity.name)
      let shape: string
      if (scope._tag === "Where") {
        const [s, marked] = scopeShape(scope.filter, values)
        shape = s
        scopes.set(entity.name, RowScope.where(marked))
      } else {
        shape = scope._tag
        scopes.set(entity.name, scope)
      }
      parts.push(entity.name, hidden, shape)
    }
    const marked = new View(view.catalog, { ...view.rules, rowScope: (entity) => scopes.get(entity) ?? RowScope.none })
    // Digested: a large catalog's class is long, and the numbers are kept for every class seen.
    const key = digest(JSON.stringify(parts))
    let id = classIds.get(key)
    if (id === undefined) {
      // Bounded: a forgotten key gets a fresh number, and plans under its old one age out.
      if (classIds.size >= CLASS_IDS) classIds.clear()
      classIds.set(key, (id = nextClassId++))
    }
    found = { id, key, token, values, marked }
  } catch {
    found = null
  }
  classes.set(view, found)
  return found ?? undefined
}

/** One statement of an entry: its text and where each parameter comes from. */
export interface Compiled {
  readonly text: string
  readonly sources: ReadonlyArray<number>
  readonly refs: ReadonlyArray<number>
  readonly constants: ReadonlyArray<unknown>
  readonly keyColumns: ReadonlyArray<number>
  readonly selectColumns: ReadonlyArray<number>
}

export interface Entry {
  readonly catalog: Catalog
  readonly limits: QueryLimitsShape
  /** The plan with marks for values: what does not depend on them (entity, select, order, first, access). */
  readonly plan: Plan
  readonly view: View
  /** The field of each leaf of the filter, in pre-order (`undefined` for `isNull`). */
  readonly fields: ReadonlyArray<FieldInfo | undefined>
  /** Canonical JSON of `select` and of the order, for the cursor fingerprint. */
  readonly selectJson: string
  readonly orderJson: string
  /** Statements by cursor shape: "" without a cursor, else one letter per key (`n` for NULL). */
  readonly statements: Map<string, Compiled>
}

/** Builds the entry for `doc` (already planned as `planned` for `view`) in class `cls`. */
export const makeEntry = (view: View, cls: ViewClass, doc: QueryDocumentV1, planned: Plan, limits: QueryLimitsShape): Entry => {
  let n = 0
  const where = doc.where === undefined ? undefined : markFilter(doc.where, () => new Mark(DOCUMENT, n++))
  const { access, rest } = reading(planned.entity, where, planned.order)
  return {
    catalog: view.catalog,
    limits,
    plan: { ...planned, access, rest },
    view: cls.marked,
    fields: doc.where === undefined ? [] : leafFields(view, planned.entity, doc.where, limits),
    selectJson: canonicalJson(doc.select),
    orderJson: canonicalJson(doc.order ?? []),
    statements: new Map()
  }
}

/** Whether the new values of a document of the entry's shape are ones its fields take. */
export const valuesFit = (entry: Entry, shape: Shape): boolean => {
  for (let i = 0; i < shape.leaves.length; i++) {
    const field = entry.fields[i]
    if (field !== undefined && leafProblems(field, shape.leaves[i]!).length > 0) return false
  }
  return true
}

/** The cursor shape of a continuation's keys. */
export const cursorShape = (cursor: ReadonlyArray<S.Bindable> | undefined): string => {
  if (cursor === undefined) return ""
  let s = ""
  for (const k of cursor) s += k === null ? "n" : "v"
  return s
}

/** The entry's statement for a cursor shape, compiled once. */
export const compiled = (entry: Entry, cursor: string): Compiled => {
  let found = entry.statements.get(cursor)
  if (found === undefined) {
    const keys = cursor === "" ? undefined : [...cursor].map((c, i) => (c === "n" ? null : new Mark(CURSOR, i)))
    const statement = pageStatement(entry.view, entry.plan, keys as ReadonlyArray<S.Bindable> | undefined, entry.limits.maxRowsExamined)
    const sources: Array<number> = []
    const refs: Array<number> = []
    const constants: Array<unknown> = []
    for (const p of statement.sql.params as ReadonlyArray<unknown>) {
      if (p instanceof Mark) {
        sources.push(p.source)
        refs.push(p.index)
        constants.push(undefined)
      } else {
        sources.push(CONSTANT)
        refs.push(0)
        constants.push(p)
      }
    }
    found = {
      text: statement.sql.text,
      sources,
      refs,
      constants,
      keyColumns: statement.keyColumns,
      selectColumns: statement.selectColumns
    }
    entry.statements.set(cursor, found)
  }
  return found
}

/** The parameters of `statement` for this request's values. Booleans are stored as 0/1, so bound that way. */
export const bind = (
  statement: Compiled,
  document: ReadonlyArray<unknown>,
  scope: ReadonlyArray<unknown>,
  cursor: ReadonlyArray<unknown> | undefined
): Array<unknown> => {
  const { constants, refs, sources } = statement
  const params = new Array<unknown>(sources.length)
  for (let i = 0; i < sources.length; i++) {
    const source = sources[i]
    const v =
      source === CONSTANT ? constants[i]
      : source === DOCUMENT ? document[refs[i]!]
      : source === SCOPE ? scope[refs[i]!]
      : cursor![refs[i]!]
    params[i] = v === true ? 1 : v === false ? 0 : v
  }
  return params
}

/** Canonical JSON of a filter `shapeOf` accepted (plain nodes with exactly their keys), without sorting. */
const canonicalFilter = (f: Filter): string => {
  switch (f.op) {
    case "and":
    case "or": {
      let s = `{"filters":[`
      for (let i = 0; i < f.filters.length; i++) s += (i === 0 ? "" : ",") + canonicalFilter(f.filters[i]!)
      return `${s}],"op":"${f.op}"}`
    }
    case "not":
      return `{"filter":${canonicalFilter(f.filter)},"op":"not"}`
    case "isNull":
      return `{"op":"isNull","path":${JSON.stringify(f.path)}}`
    default:
      return `{"op":${JSON.stringify(f.op)},"path":${JSON.stringify(f.path)},"value":${JSON.stringify(f.value)}}`
  }
}

/**
 * The canonical JSON the cursor fingerprint digests (`canonicalJson({v, from, where, select,
 * order})`), built from the entry's parts: only for a document `shapeOf` accepted.
 */
export const fingerprintJson = (entry: Entry, doc: QueryDocumentV1): string =>
  `{"from":${JSON.stringify(doc.from.name)},"order":${entry.orderJson},"select":${entry.selectJson},"v":1,"where":${
    doc.where === undefined ? "null" : canonicalFilter(doc.where)
  }}`

/** A bounded map that forgets the least recently used entry. */
export class Lru<V> {
  private readonly map = new Map<string, V>()
  constructor(readonly capacity: number) {}

  get(key: string): V | undefined {
    const v = this.map.get(key)
    if (v !== undefined) {
      this.map.delete(key)
      this.map.set(key, v)
    }
    return v
  }

  set(key: string, value: V): void {
    this.map.delete(key)
    if (this.map.size >= this.capacity) this.map.delete(this.map.keys().next().value!)
    this.map.set(key, value)
  }

  get size(): number {
    return this.map.size
  }
}

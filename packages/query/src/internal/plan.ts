/**
 * Validates a QueryDocumentV1 against a principal's visible catalog and the budgets,
 * and chooses how to read the root table: every path resolved (joins for relationship
 * hops), the order completed by `id`, and an access path whose work is bounded.
 */
import type { CompiledEntity, CompiledField, CompiledRelationship } from "@cairn/catalog/Catalog"
import type { View } from "@cairn/catalog/View"
import { digest } from "@cairn/catalog/Digest"
import { leafIssue, leafProblems } from "@cairn/catalog/ColumnValue"
import { type Direction, type Filter, idOperators, type Path, type QueryDocumentV1, type Scalar } from "@cairn/domain/QueryDocument"
import { Inaccessible, InvalidQuery, isPublicError, type PublicError, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { checkFilter, malformed } from "../FilterDecoder.js"
import type { QueryLimitsShape } from "../QueryLimits.js"

export const isIdField = (field: FieldInfo): field is IdField => field === idField

/** A path's last element: a field of the catalog, or the record id. */
export type FieldInfo = CompiledField | IdField

export interface Resolved {
  readonly hops: ReadonlyArray<CompiledRelationship>
  readonly field: FieldInfo
  /** Join key of the entity holding the field: "" for the root, else hop names joined by ".". */
  readonly owner: string
}

export interface Join {
  readonly key: string
  readonly parent: string
  readonly relationship: CompiledRelationship
}

export interface OrderKey {
  readonly resolved: Resolved
  readonly direction: Direction
}

/** An equality the index seek satisfies; `null` means `IS NULL`. */
export interface Seek {
  readonly column: string
  readonly value: Scalar
}

/**
 * How candidate rows of the root table are read. `Ordered`: an index (or the primary
 * key) walked in the page's order, so the page stops after enough matches. `Sorted`:
 * the rows the seek selects, read unordered and sorted. `index` undefined is the
 * primary key.
 */
export type Access =
  | { readonly _tag: "Ordered"; readonly index: string | undefined; readonly seek: ReadonlyArray<Seek> }
  | { readonly _tag: "Sorted"; readonly index: string | undefined; readonly seek: ReadonlyArray<Seek> }

export interface Plan {
  readonly entity: CompiledEntity
  readonly select: ReadonlyArray<{ readonly name: string; readonly resolved: Resolved }>
  /** The total order: the document's terms up to `id`, then `id`. */
  readonly order: ReadonlyArray<OrderKey>
  readonly joins: ReadonlyArray<Join>
  /** The filter left after the seek, applied to every candidate row. */
  readonly rest: Filter | undefined
  readonly first: number
  readonly access: Access
  /** Digest of the document without `page`: what a cursor is bound to (computed when a cursor is). */
  readonly fingerprint: () => string
}

export interface IdField {
  readonly name: "id"
  readonly column: "text"
  readonly nullable: false
  readonly literals?: undefined
  readonly operators: ReadonlyArray<string>
}

export const idField: IdField = {
  name: "id",
  column: "text",
  nullable: false,
  operators: idOperators
}

const pointer = (segment: string) => segment.replace(/~/g, "~0").replace(/\//g, "~1")

const invalid = (where: string, message: string) =>
  new InvalidQuery({ message: `${where}: ${message}`, issues: [{ path: where, message }] })

const budget = (limit: keyof QueryLimitsShape, message: string) => new QueryBudgetExceeded({ limit, message })

const isError = isPublicError

class Planner {
  private readonly joins = new Map<string, Join>()

  constructor(
    readonly view: View,
    readonly entity: CompiledEntity,
    readonly limits: QueryLimitsShape
  ) {}

  /**
   * What the caller can use on `entity`, so a typo can be fixed without a round trip; it
   * names only what the caller sees, so a hidden name and a nonexistent one read alike.
   */
  usable(entity: string): string {
    const compiled = this.view.entity(entity)
    if (!compiled) return `Inspect ${entity} with describe to see its fields and relationships.`
    const fields = ["id", ...this.view.fields(compiled).map((f) => f.name)]
    const relationships = this.view.relationships(compiled).map((r) => r.name)
    const list = (names: ReadonlyArray<string>) => (names.length > 40 ? `${names.slice(0, 40).join(", ")}, …` : names.join(", "))
    return `Fields you can use on ${entity}: ${list(fields)}${relationships.length > 0 ? `; relationships: ${list(relationships)}` : ""}.`
  }

  joinList(): ReadonlyArray<Join> {
    return [...this.joins.values()]
  }

  /**
   * Resolves a path in the visible catalog. A hidden field, relationship or entity
   * answers exactly as a nonexistent one: the message depends only on the request
   * and on what the caller can see.
   */
  resolve(path: Path, where: string): Resolved | PublicError {
    if (path.length - 1 > this.limits.maxPathDepth) {
      return budget(
        "maxPathDepth",
        `${where}: the path ${JSON.stringify(path)} follows ${path.length - 1} relationships; at most ${this.limits.maxPathDepth} are allowed. Query the related entity directly instead.`
      )
    }
    let current = this.entity.name
    let owner = ""
    const hops: Array<CompiledRelationship> = []
    const unknown = (segment: string) =>
      new Inaccessible({
        message: `${where}: the path ${JSON.stringify(path)} cannot be resolved: "${segment}" is not a field or relationship of ${current} that you can use. ${this.usable(current)}`
      })
    for (const [i, segment] of path.entries()) {
      if (i === path.length - 1) {
        if (segment === "id") return { hops, field: idField, owner }
        const field = this.view.field(current, segment)
        if (field) return { hops, field, owner }
        const rel = this.view.relationship(current, segment)
        if (rel) {
          return invalid(
            where,
            `the path ${JSON.stringify(path)} ends at the relationship "${segment}"; add a field of ${rel.target} after it, e.g. ${JSON.stringify([...path, "id"])}.`
          )
        }
        return unknown(segment)
      }
      const rel = this.view.relationship(current, segment)
      if (!rel) {
        if (segment === "id" || this.view.field(current, segment)) {
          return invalid(where, `the path ${JSON.stringify(path)} continues after the field "${segment}"; only relationships can be followed.`)
        }
        return unknown(segment)
      }
      const key = owner === "" ? segment : `${owner}.${segment}`
      if (!this.joins.has(key)) this.joins.set(key, { key, parent: owner, relationship: rel })
      hops.push(rel)
      owner = key
      current = rel.target
    }
    return unknown(path[path.length - 1]!)
  }

  checkFilter(filter: Filter, where: string): PublicError | undefined {
    switch (filter.op) {
      case "and":
      case "or": {
        for (const [i, f] of filter.filters.entries()) {
          const error = this.checkFilter(f, `${where}/filters/${i}`)
          if (error) return error
        }
        return undefined
      }
      case "not":
        return this.checkFilter(filter.filter, `${where}/filter`)
      default: {
        const resolved = this.resolve(filter.path, `${where}/path`)
        if (isError(resolved)) return resolved
        const field = resolved.field
        const problem = leafProblems(field, filter)[0]
        if (problem === undefined) return undefined
        const issue = leafIssue(field, filter, problem, where)
        return invalid(issue.path, issue.message)
      }
    }
  }
}

interface Candidate {
  readonly index: string | undefined
  /** How many leading index fields the seek fixes. */
  readonly fixed: number
  readonly fields: ReadonlyArray<string>
}

/**
 * Chooses the access path. A walk is `Ordered` when an index's fields are some
 * equalities of the filter followed exactly by the order's fields (all on the root
 * entity, one direction), since a WITHOUT ROWID index ends with `id`: the page then
 * stops after enough matches. Otherwise the rows selected by the longest equality
 * prefix of any index are read and sorted. An ordered walk is preferred unless another
 * index fixes more equalities (a narrower seek beats a longer walk).
 */
const chooseAccess = (
  entity: CompiledEntity,
  equalities: ReadonlyMap<string, Scalar>,
  order: ReadonlyArray<OrderKey>
): Access => {
  const seekOf = (fields: ReadonlyArray<string>): ReadonlyArray<Seek> =>
    fields.map((column) => ({ column, value: equalities.get(column)! }))
  if (equalities.has("id")) return { _tag: "Sorted", index: undefined, seek: seekOf(["id"]) }
  const terms = order.slice(0, -1)
  const direction = order[order.length - 1]!.direction
  const walkable = terms.every((t) => t.resolved.hops.length === 0 && t.direction === direction)
  const orderFields = terms.map((t) => t.resolved.field.name)
  let ordered: Candidate | undefined = orderFields.length === 0 ? { index: undefined, fixed: 0, fields: [] } : undefined
  let seek: Candidate = { index: undefined, fixed: 0, fields: [] }
  for (const ix of entity.indexes) {
    let prefix = 0
    while (prefix < ix.fields.length && equalities.has(ix.fields[prefix]!)) prefix++
    if (prefix > seek.fixed) seek = { index: ix.name, fixed: prefix, fields: ix.fields.slice(0, prefix) }
    if (!walkable) continue
    for (let fixed = Math.min(prefix, ix.fields.length); fixed >= 0; fixed--) {
      const tail = ix.fields.slice(fixed)
      if (tail.length === orderFields.length && tail.every((f, i) => f === orderFields[i])) {
        if (!ordered || fixed > ordered.fixed) ordered = { index: ix.name, fixed, fields: ix.fields.slice(0, fixed) }
        break
      }
    }
  }
  if (walkable && ordered && ordered.fixed >= seek.fixed) return { _tag: "Ordered", index: ordered.index, seek: seekOf(ordered.fields) }
  return { _tag: "Sorted", index: seek.index, seek: seekOf(seek.fields) }
}

/**
 * How the root table is read for a validated filter: the access path and the filter left
 * after its seek. Depends on the filter's structure only; values are carried through, so
 * the plan cache runs it over a filter whose values are placeholders.
 */
export const reading = (
  entity: CompiledEntity,
  where: Filter | undefined,
  order: ReadonlyArray<OrderKey>
): { readonly access: Access; readonly rest: Filter | undefined } => {
  const conjuncts: ReadonlyArray<Filter> = where === undefined ? [] : where.op === "and" ? where.filters : [where]
  const equalities = new Map<string, Scalar>()
  const source = new Map<string, number>()
  conjuncts.forEach((f, i) => {
    if ((f.op === "eq" || f.op === "isNull") && f.path.length === 1 && !equalities.has(f.path[0]!)) {
      equalities.set(f.path[0]!, f.op === "eq" ? f.value : null)
      source.set(f.path[0]!, i)
    }
  })
  const access = chooseAccess(entity, equalities, order)
  const consumed = new Set(access.seek.map((s) => source.get(s.column)!))
  const remaining = conjuncts.filter((_, i) => !consumed.has(i))
  const rest: Filter | undefined =
    remaining.length === 0 ? undefined : remaining.length === 1 ? remaining[0] : { op: "and", filters: remaining }
  return { access, rest }
}

/**
 * The field each comparison of a validated filter reads, in pre-order (`undefined` for
 * `isNull` and the and/or/not nodes are skipped): what a cached plan checks new values against.
 */
export const leafFields = (view: View, entity: CompiledEntity, where: Filter, limits: QueryLimitsShape): ReadonlyArray<FieldInfo | undefined> => {
  const planner = new Planner(view, entity, limits)
  const out: Array<FieldInfo | undefined> = []
  const walk = (f: Filter): void => {
    switch (f.op) {
      case "and":
      case "or":
        f.filters.forEach(walk)
        return
      case "not":
        walk(f.filter)
        return
      case "isNull":
        out.push(undefined)
        return
      default: {
        const resolved = planner.resolve(f.path, "")
        if (isError(resolved)) throw new Error("leafFields: the filter was not validated")
        out.push(resolved.field)
      }
    }
  }
  walk(where)
  return out
}

/** Validates `doc` for `view` within `limits`; the first problem found is the answer. */
export const plan = (view: View, doc: QueryDocumentV1, limits: QueryLimitsShape): Plan | PublicError => {
  const entity = view.entity(doc.from.name)
  if (!entity) {
    // Hidden and nonexistent answer alike: `inaccessible`, revealing nothing (spec: authentication rule 3).
    return new Inaccessible({
      message: `No entity named "${doc.from.name}" is available to you. Browse or search with describe to find exact references.`
    })
  }
  const first = doc.page?.first ?? limits.defaultPageSize
  if (first > limits.maxPageSize) {
    return budget(
      "maxPageSize",
      `/query/page/first: pages hold at most ${limits.maxPageSize} rows; ask for ${limits.maxPageSize} or fewer and continue with the cursor.`
    )
  }
  const selectEntries = Object.entries(doc.select)
  if (selectEntries.length === 0) return invalid("/query/select", "select at least one path, e.g. {\"id\": {\"path\": [\"id\"]}}.")
  if (selectEntries.length > limits.maxProjection) {
    return budget(
      "maxProjection",
      `/query/select: ${selectEntries.length} outputs requested; at most ${limits.maxProjection} are allowed. Select fewer paths.`
    )
  }
  const docOrder = doc.order ?? []
  if (docOrder.length > limits.maxOrderTerms) {
    return budget("maxOrderTerms", `/query/order: ${docOrder.length} order terms; at most ${limits.maxOrderTerms} are allowed. Order by fewer paths.`)
  }
  if (doc.where) {
    // The same bounded check the request decoders make: a document built in code is held to it too.
    const problem = checkFilter(doc.where, "/query/where", limits, malformed("query"))
    if (problem) return problem
  }

  const planner = new Planner(view, entity, limits)
  const select: Array<{ name: string; resolved: Resolved }> = []
  for (const [name, selection] of selectEntries) {
    const resolved = planner.resolve(selection.path, `/query/select/${pointer(name)}/path`)
    if (isError(resolved)) return resolved
    select.push({ name, resolved })
  }
  if (doc.where) {
    const error = planner.checkFilter(doc.where, "/query/where")
    if (error) return error
  }
  const order: Array<OrderKey> = []
  for (const [i, term] of docOrder.entries()) {
    const resolved = planner.resolve(term.path, `/query/order/${i}/path`)
    if (isError(resolved)) return resolved
    order.push({ resolved, direction: term.direction })
    // `id` is unique: it completes the order, so later terms could never matter.
    if (resolved.hops.length === 0 && resolved.field.name === "id") break
  }
  const last = order[order.length - 1]
  if (!last || last.resolved.hops.length > 0 || last.resolved.field.name !== "id") {
    order.push({ resolved: { hops: [], field: idField, owner: "" }, direction: last?.direction ?? "asc" })
  }

  const { access, rest } = reading(entity, doc.where, order)
  return {
    entity,
    select,
    order,
    joins: planner.joinList(),
    rest,
    first,
    access,
    fingerprint: () => digest({ v: 1, from: doc.from.name, where: doc.where ?? null, select: doc.select, order: docOrder })
  }
}

export { isError }

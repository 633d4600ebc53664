/**
 * Resolves a requested sync scope against a principal's view: each entity must be
 * visible, and its optional filter may only use the entity's own visible fields (so a
 * filter never reads through a relationship the client cannot see, and replaying a
 * change needs no extra reads to decide it).
 */
import { RowScope } from "@cairn/catalog"
import { type CompiledEntity, type CompiledField } from "@cairn/catalog/Catalog"
import { digest } from "@cairn/catalog/Digest"
import { leafIssue, leafProblems } from "@cairn/catalog/ColumnValue"
import { type View } from "@cairn/catalog/View"
import { type Filter, idOperators } from "@cairn/domain/QueryDocument"
import { Inaccessible, InvalidQuery, type Issue, type QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type SyncScope } from "@cairn/domain/Sync"
import * as SubjectTemplate from "@cairn/policy/SubjectTemplate"
import { checkFilter as checkBounds, type FilterLimits, malformed } from "@cairn/query/FilterDecoder"
import { Effect } from "effect"

export interface ScopeEntry {
  readonly entity: CompiledEntity
  /** Fields the principal sees; every record sent carries only these (and `id`). */
  readonly fields: ReadonlyArray<CompiledField>
  readonly rowScope: RowScope.RowScope
  /** The client's own narrowing filter, over the entity's own fields. */
  readonly where: RowScope.ScopeFilter | undefined
}

export interface ResolvedScope {
  readonly entries: ReadonlyArray<ScopeEntry>
  readonly byEntity: ReadonlyMap<string, ScopeEntry>
  /** Digest of the scope as requested: a cursor resumes only the scope it was issued for. */
  readonly scopeDigest: string
  /** Digest of what the principal may see of it: changes when roles or claims change the view. */
  readonly accessDigest: string
}

const checkFilter = (view: View, entity: CompiledEntity, filter: Filter, at: string, issues: Array<Issue>): void => {
  switch (filter.op) {
    case "and":
    case "or":
      filter.filters.forEach((f, i) => checkFilter(view, entity, f, `${at}/filters/${i}`, issues))
      return
    case "not":
      checkFilter(view, entity, filter.filter, `${at}/filter`, issues)
      return
    default: {
      if (filter.path.length !== 1) {
        issues.push({ path: `${at}/path`, message: "a sync filter may only name a field of the entity itself, not a relationship path" })
        return
      }
      const name = filter.path[0]!
      const field = name === "id" ? undefined : view.field(entity.name, name)
      if (name !== "id" && field === undefined) {
        issues.push({ path: `${at}/path`, message: `${entity.name} has no field "${name}"` })
        return
      }
      const target = field ?? { column: "text" as const, operators: idOperators }
      // Worded as a query's filter words it.
      for (const problem of leafProblems(target, filter)) issues.push(leafIssue(target, filter, problem, at))
    }
  }
}

/**
 * Resolves `scope` for the principal whose view this is. Each filter is first held to
 * the query budgets (the same bounded check the request decoders make), so a scope
 * built in code cannot bypass them either.
 */
export const resolveScope = (
  view: View,
  scope: SyncScope,
  limits: FilterLimits
): Effect.Effect<ResolvedScope, Inaccessible | InvalidQuery | QueryBudgetExceeded> =>
  Effect.suspend((): Effect.Effect<ResolvedScope, Inaccessible | InvalidQuery | QueryBudgetExceeded> => {
    for (const [i, requested] of scope.entities.entries()) {
      if (requested.where === undefined) continue
      const problem = checkBounds(requested.where, `/scope/entities/${i}/where`, limits, malformed("sync"))
      if (problem !== undefined) return Effect.fail(problem)
    }
    const entries: Array<ScopeEntry> = []
    const issues: Array<Issue> = []
    for (const [i, requested] of scope.entities.entries()) {
      const entity = view.entity(requested.from.name)
      // Hidden and nonexistent answer alike: `inaccessible`, revealing nothing (spec: authentication rule 3), as a query's `from`.
      if (!entity) {
        return Effect.fail(
          new Inaccessible({
            message: `No entity named "${requested.from.name}" is available to you. Browse or search with describe to find exact references.`
          })
        )
      }
      if (entries.some((e) => e.entity.name === entity.name)) {
        issues.push({ path: `/scope/entities/${i}/from`, message: `${entity.name} appears more than once; combine its filters with "or"` })
        continue
      }
      if (requested.where !== undefined) checkFilter(view, entity, requested.where, `/scope/entities/${i}/where`, issues)
      entries.push({ entity, fields: view.fields(entity), rowScope: view.rowScope(entity.name), where: requested.where })
    }
    if (issues.length > 0) return Effect.fail(new InvalidQuery({ message: "The sync scope is not valid.", issues }))
    const scopeDigest = digest({ v: 1, scope })
    return Effect.succeed({ entries, byEntity: new Map(entries.map((e) => [e.entity.name, e])), scopeDigest, accessDigest: accessDigestOf(entries) })
  })

/**
 * The row scopes, and the fields the principal may NOT see: revealing or hiding one changes it
 * (the replica's records would be wrong), while a field the catalog adds (stored rows hold no
 * value for it) leaves it as it was, so an additive catalog change keeps cursors.
 */
const accessDigestOf = (entries: ReadonlyArray<ScopeEntry>) =>
  digest({
    v: 2,
    entries: entries.map((e) => ({
      entity: e.entity.name,
      rows: e.rowScope,
      hidden: e.entity.fields.filter((f) => !e.fields.includes(f)).map((f) => f.name)
    }))
  })

/**
 * The scope with every row scope a template over `subject` (see `SubjectTemplate`): streams
 * whose templates' access digests are equal read rows by one rule up to their subject.
 * Undefined when some row scope has no template.
 */
export const subjectTemplate = (scope: ResolvedScope, subject: string): ResolvedScope | undefined => {
  const entries: Array<ScopeEntry> = []
  for (const entry of scope.entries) {
    const rowScope = SubjectTemplate.template(entry.rowScope, subject)
    if (rowScope === undefined) return undefined
    entries.push({ ...entry, rowScope })
  }
  return { entries, byEntity: new Map(entries.map((e) => [e.entity.name, e])), scopeDigest: scope.scopeDigest, accessDigest: accessDigestOf(entries) }
}

/** The record as the principal may see it: `id` and visible fields only. */
export const strip = (entry: ScopeEntry, record: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const out: Record<string, unknown> = { id: record["id"] }
  for (const field of entry.fields) if (record[field.name] !== undefined) out[field.name] = record[field.name]
  return out
}

/** The filter a record of this entry must satisfy, besides its row scope. */
export const entryFilter = (entry: ScopeEntry): RowScope.RowScope =>
  entry.rowScope._tag === "None"
    ? RowScope.none
    : entry.where === undefined
      ? entry.rowScope
      : entry.rowScope._tag === "All"
        ? RowScope.where(entry.where)
        : RowScope.where({ op: "and", filters: [entry.rowScope.filter, entry.where] })

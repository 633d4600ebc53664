/**
 * The `describe` engine: browse, search or inspect a principal's visible catalog.
 * Every transport (RPC, MCP) calls this one function.
 */
import { Config, Context, Effect, Layer, Option, Schema } from "effect"
import { type Card, type Definition, type DescribeRequest, type DescribeResult } from "@cairn/domain/Describe"
import { type DefinitionRef, refKey } from "@cairn/domain/References"
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Inaccessible, InvalidQuery, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import type { CompiledEntity, CompiledOperation, CompiledTrait } from "./Catalog.js"
import { Sealer } from "./Sealer.js"
import { digest } from "./Digest.js"
import type { View } from "./View.js"

export interface DescribeLimitsShape {
  /** `page.limit` when the request gives none. */
  readonly defaultLimit: number
  /** Largest `page.limit`, and most references one inspect may name. */
  readonly maxLimit: number
}

export const defaultDescribeLimits: DescribeLimitsShape = { defaultLimit: 25, maxLimit: 100 }

/** The limit a discovery page or inspect list over `maxLimit` names in its `query_budget_exceeded`. */
export const discoveryLimit = "discoveryMaxLimit"

/**
 * The discovery budgets as settings: `CAIRN_DISCOVERY_MAX_LIMIT` (largest describe page
 * and most references per inspect) and `CAIRN_DISCOVERY_DEFAULT_LIMIT`, defaulting to
 * `defaultDescribeLimits`.
 */
export const describeLimitsConfig: Config.Config<DescribeLimitsShape> = Config.all({
  defaultLimit: positiveInteger("CAIRN_DISCOVERY_DEFAULT_LIMIT").pipe(Config.withDefault(defaultDescribeLimits.defaultLimit)),
  maxLimit: positiveInteger("CAIRN_DISCOVERY_MAX_LIMIT").pipe(Config.withDefault(defaultDescribeLimits.maxLimit))
}).pipe(
  Config.validate({
    message: "CAIRN_DISCOVERY_DEFAULT_LIMIT must not exceed CAIRN_DISCOVERY_MAX_LIMIT",
    validation: (l) => l.defaultLimit <= l.maxLimit
  })
)

/**
 * The discovery limit: page sizes for browse and search, and references per inspect.
 * Required: a deployment that forgets it must not build with silent limits.
 */
export class DescribeLimits extends Context.Tag("@cairn/catalog/DescribeLimits")<DescribeLimits, DescribeLimitsShape>() {
  static readonly layer = (limits: Partial<DescribeLimitsShape> = {}) =>
    Layer.succeed(DescribeLimits, { ...defaultDescribeLimits, ...limits })
  static readonly layerConfig = Layer.effect(DescribeLimits, describeLimitsConfig)
}

/** What a describe cursor carries: the catalog token, the request's digest and the offset. */
const DescribeCursor = Schema.Struct({ t: Schema.String, q: Schema.String, o: Schema.NonNegativeInt })

type Def =
  | { readonly kind: "entity"; readonly def: CompiledEntity }
  | { readonly kind: "trait"; readonly def: CompiledTrait }
  | { readonly kind: "operation"; readonly def: CompiledOperation }

const summaryOf = (description: string): string => {
  const first = description.trim().split(/(?<=[.!?])\s/)[0] ?? ""
  return first.length > 200 ? first.slice(0, 197) + "..." : first
}

const refOf = (d: Def): DefinitionRef =>
  d.kind === "operation" ? d.def.ref : { kind: d.kind, name: d.def.name }

const displayName = (d: Def): string => (d.kind === "operation" ? `${d.def.owner}.${d.def.name}` : d.def.name)

const visibleDefs = (view: View): ReadonlyArray<Def> => [
  ...view.entities().map((def) => ({ kind: "entity" as const, def })),
  ...view.traits().map((def) => ({ kind: "trait" as const, def })),
  ...view.operations().map((def) => ({ kind: "operation" as const, def }))
]

/** A deprecation as this view shows it: a replacement the caller cannot see is not named. */
const visibleDeprecation = (
  deprecated: { readonly reason: string; readonly replacement?: string },
  visible: (replacement: string) => boolean
) =>
  deprecated.replacement !== undefined && visible(deprecated.replacement)
    ? { reason: deprecated.reason, replacement: deprecated.replacement }
    : { reason: deprecated.reason }

const deprecation = (view: View, d: Def) => {
  if (d.kind === "trait" || d.def.deprecated === undefined) return {}
  const visible =
    d.kind === "entity"
      ? (r: string) => view.entity(r) !== undefined
      : (r: string) => {
          const [owner, name] = r.split(".")
          return owner !== undefined && name !== undefined && view.operation(owner, name) !== undefined
        }
  return { deprecated: visibleDeprecation(d.def.deprecated, visible) }
}

const cardOf = (view: View, d: Def): Card => {
  switch (d.kind) {
    case "entity":
      return {
        ref: refOf(d),
        summary: summaryOf(d.def.description),
        ...deprecation(view, d),
        fields: ["id", ...view.fields(d.def).map((f) => f.name)]
      }
    case "trait":
      return { ref: refOf(d), summary: summaryOf(d.def.description), fields: d.def.fields.map((f) => f.name) }
    case "operation":
      return { ref: refOf(d), summary: summaryOf(d.def.description), ...deprecation(view, d), targeted: d.def.targeted }
  }
}

const definitionOf = (view: View, d: Def): Definition => {
  switch (d.kind) {
    case "entity": {
      const e = d.def
      const fields = view.fields(e)
      return {
        ref: { kind: "entity", name: e.name },
        description: e.description,
        id: { type: "string", description: "Server-generated record id; use it as target.id." },
        fields: Object.fromEntries(
          fields.map((f) => [
            f.name,
            {
              schema: f.jsonSchema,
              nullable: f.nullable,
              indexed: f.indexed,
              operators: f.operators,
              ...(f.trait ? { trait: f.trait } : {}),
              ...(f.deprecated ? { deprecated: visibleDeprecation(f.deprecated, (r) => view.field(e.name, r) !== undefined) } : {})
            }
          ])
        ),
        relationships: Object.fromEntries(
          view.relationships(e).map((r) => [r.name, { target: { kind: "entity" as const, name: r.target }, via: r.via, cardinality: "one" as const }])
        ),
        indexes: e.indexes.filter((ix) => ix.fields.every((f) => view.field(e.name, f))).map((ix) => ix.fields),
        traits: e.traits.filter((t) => view.trait(t)).map((name) => ({ kind: "trait" as const, name })),
        operations: e.operations.filter((o) => view.operation(e.name, o)).map((name) => ({
          kind: "operation" as const,
          owner: { kind: "entity" as const, name: e.name },
          name
        })),
        ...deprecation(view, d)
      }
    }
    case "trait":
      return {
        ref: { kind: "trait", name: d.def.name },
        description: d.def.description,
        fields: Object.fromEntries(d.def.fields.map((f) => [f.name, f.jsonSchema])),
        entities: d.def.entities.filter((e) => view.entity(e)).map((name) => ({ kind: "entity" as const, name }))
      }
    case "operation":
      return {
        ref: d.def.ref,
        description: d.def.description,
        targeted: d.def.targeted,
        input: d.def.inputJsonSchema,
        output: d.def.outputJsonSchema,
        ...deprecation(view, d)
      }
  }
}

const lookup = (view: View, ref: DefinitionRef): Def | undefined => {
  switch (ref.kind) {
    case "entity": {
      const def = view.entity(ref.name)
      return def && { kind: "entity", def }
    }
    case "trait": {
      const def = view.trait(ref.name)
      return def && { kind: "trait", def }
    }
    case "operation": {
      const def = view.operation(ref.owner.name, ref.name)
      return def && { kind: "operation", def }
    }
  }
}

/** Lower-case words of a name or text; camelCase and dotted names split into parts. */
const words = (text: string): ReadonlyArray<string> =>
  text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0)

/** Ranks by name matches first, then description matches; ties keep catalog order. */
const rank = (defs: ReadonlyArray<Def>, query: string): ReadonlyArray<Def> => {
  const terms = words(query)
  const whole = query.trim().toLowerCase()
  const scored = defs.map((d, index) => {
    const name = displayName(d).toLowerCase()
    const nameWords = words(displayName(d))
    const descriptionWords = words(d.def.description)
    let score = name === whole || d.def.name.toLowerCase() === whole ? 100 : 0
    for (const term of terms) {
      if (nameWords.includes(term)) score += 10
      else if (nameWords.some((w) => w.startsWith(term))) score += 5
      if (descriptionWords.includes(term)) score += 2
      else if (term.length >= 3 && descriptionWords.some((w) => w.startsWith(term))) score += 1
    }
    return { d, index, score }
  })
  return scored
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .map((s) => s.d)
}

const modes = ["browse", "search", "inspect"] as const

export const describe = Effect.fn("Describe.describe")(function* (view: View, request: DescribeRequest) {
  const limits = yield* DescribeLimits
  const sealer = yield* Sealer
  const given = modes.filter((m) => request[m] !== undefined)
  if (given.length !== 1) {
    return yield* new InvalidQuery({
      message:
        given.length === 0
          ? "describe takes exactly one of browse, search or inspect; this request has none."
          : `describe takes exactly one of browse, search or inspect; this request has ${given.join(" and ")}.`
    })
  }
  const limit = request.page?.limit ?? limits.defaultLimit
  // A well-formed request over a discovery limit is refused as a query's page size is: a budget, with the way on.
  if (limit > limits.maxLimit) {
    return yield* new QueryBudgetExceeded({
      limit: discoveryLimit,
      message: `page.limit may be at most ${limits.maxLimit}; ask for ${limits.maxLimit} or fewer and continue with page.after.`
    })
  }

  if (request.inspect) {
    if (request.page?.after !== undefined) {
      return yield* new InvalidQuery({ message: "inspect returns every requested definition at once; remove page.after." })
    }
    if (request.inspect.length > limits.maxLimit) {
      return yield* new QueryBudgetExceeded({
        limit: discoveryLimit,
        message: `inspect accepts at most ${limits.maxLimit} references at once; inspect the rest in further calls.`
      })
    }
    const found: Array<Def> = []
    const seen = new Set<string>()
    for (const ref of request.inspect) {
      const d = lookup(view, ref)
      if (!d) {
        const shown = ref.kind === "operation" ? `${ref.owner.name}.${ref.name}` : ref.name
        // Hidden and nonexistent answer alike (spec: a capability the caller may not see is
        // `inaccessible` and never reveals whether it exists).
        return yield* new Inaccessible({
          message: `No ${ref.kind} named "${shown}" is available to you. Browse or search with describe to find exact references.`
        })
      }
      if (!seen.has(refKey(ref))) found.push(d)
      seen.add(refKey(ref))
    }
    const result: DescribeResult = {
      catalogToken: view.token,
      cards: found.map((d) => cardOf(view, d)),
      definitions: found.map((d) => definitionOf(view, d))
    }
    return result
  }

  const all = visibleDefs(view)
  const mode = request.browse ? { browse: [...new Set(request.browse.kinds)].sort() } : { search: request.search! }
  const matches = request.browse
    ? all.filter((d) => request.browse!.kinds.includes(d.kind))
    : rank(all, request.search!)
  const queryDigest = digest(mode)

  // Pages belong to this exact catalog (descriptions included) as this view shows it.
  const pageKey = digest([view.catalog.token, view.token]).slice(0, 22)
  let offset = 0
  if (request.page?.after !== undefined) {
    const opened = sealer.open("describe", DescribeCursor, request.page.after)
    if (Option.isNone(opened)) {
      return yield* new InvalidQuery({ message: "page.after is not a cursor this service issued; start again without it." })
    }
    const cursor = opened.value
    if (cursor.t !== pageKey) {
      return yield* new InvalidQuery({
        message: "page.after belongs to an earlier version of the catalog; start again without it (the current catalogToken is in this error's result)."
      })
    }
    if (cursor.q !== queryDigest) {
      return yield* new InvalidQuery({ message: "page.after belongs to a different describe request; repeat that request or start again without it." })
    }
    offset = cursor.o
  }
  const page = matches.slice(offset, offset + limit)
  const next = offset + limit
  const result: DescribeResult = {
    catalogToken: view.token,
    cards: page.map((d) => cardOf(view, d)),
    ...(next < matches.length ? { cursor: sealer.seal("describe", DescribeCursor, { t: pageKey, q: queryDigest, o: next }) } : {})
  }
  return result
})

/**
 * The catalog token as a version per definition. Each definition has a version that changes
 * only when the definition changes in a way an old client could be hurt by:
 *
 * - an entity's version counts the declared migrations that cover it (or one of its fields):
 *   every other change to an entity either is additive or was validated against the stored
 *   data (see the store's change plan), so clients that read or write it keep working;
 * - an operation's version is a digest of what a caller relies on: whether it is targeted, the
 *   schemas of its required input properties, and its output. A new optional input or a new
 *   description keeps it.
 *
 * The token a view issues (`v2.` + base64url) holds a 4-byte digest of the root schema, then a
 * 5-byte digest of `kind name@version` for every operation the view shows and every entity whose
 * version is past its first (so a catalog of many entities that never needed a migration has a
 * short token). A request is checked only against the definitions it touches: each must be in
 * the token at its current version (an entity at its first version is in every token). So an additive change keeps old
 * tokens, bindings and sync cursors working, and an incompatible change to one definition
 * fails only the requests that touch it, with `catalog_changed`. Tokens from before versions
 * (`Catalog.token`, a digest of the whole catalog) are still admitted while that digest holds.
 */
import { createHash } from "node:crypto"
import type { Catalog, CompiledEntity, CompiledOperation, JsonSchemaObject } from "./Catalog.js"
import { digest } from "./Digest.js"

const PREFIX = "v2."
const WIDTH = 5
const HEAD = 4
const FIRST = "1"

/** A definition a request touches: an entity by name, an operation by `Owner.name`. */
export type Touched = { readonly kind: "entity"; readonly name: string } | { readonly kind: "operation"; readonly owner: string; readonly name: string }

export const entity = (name: string): Touched => ({ kind: "entity", name })
export const operation = (owner: string, name: string): Touched => ({ kind: "operation", owner, name })

const coveredBy = (catalog: Catalog, entityName: string) =>
  catalog.migrations.filter((m) => m.covers.some((c) => c === entityName || c.startsWith(`${entityName}.`))).length

/** What a caller of an operation relies on: required inputs, targeting, output. */
const operationShape = (op: CompiledOperation) => {
  const input = op.inputJsonSchema as JsonSchemaObject & { readonly required?: ReadonlyArray<string>; readonly properties?: Record<string, unknown> }
  const required = [...(input.required ?? [])].sort()
  return digest({ targeted: op.targeted, required: Object.fromEntries(required.map((k) => [k, input.properties?.[k] ?? null])), output: op.outputJsonSchema }).slice(0, 16)
}

const versions = new WeakMap<Catalog, Map<string, string>>()

/** The version of every definition of `catalog`, by key (`entity:Name`, `operation:Owner.name`). */
export const versionsOf = (catalog: Catalog): ReadonlyMap<string, string> => {
  let found = versions.get(catalog)
  if (found === undefined) {
    found = new Map()
    for (const e of catalog.entities) found.set(`entity:${e.name}`, String(1 + coveredBy(catalog, e.name)))
    for (const o of catalog.operations) found.set(`operation:${o.owner}.${o.name}`, operationShape(o))
    versions.set(catalog, found)
  }
  return found
}

const keyOf = (touched: Touched) => (touched.kind === "entity" ? `entity:${touched.name}` : `operation:${touched.owner}.${touched.name}`)

const entry = (catalog: Catalog, key: string, version: string) =>
  createHash("sha256").update(`${catalog.name}\u0000${key}@${version}`).digest().subarray(0, WIDTH)

const head = (catalog: Catalog) => createHash("sha256").update(`cairn/catalog-token/v2\u0000${catalog.name}`).digest().subarray(0, HEAD)

const tokens = new WeakMap<Catalog, Map<string, string>>()

/** The token of a view showing `entities` and `operations` of `catalog`. */
export const tokenOf = (catalog: Catalog, entities: ReadonlyArray<CompiledEntity>, operations: ReadonlyArray<CompiledOperation>): string => {
  const all = versionsOf(catalog)
  const keys = [
    ...entities.map((e) => `entity:${e.name}`).filter((k) => all.get(k) !== FIRST),
    ...operations.map((o) => `operation:${o.owner}.${o.name}`)
  ].sort()
  const visible = keys.join(",")
  let cache = tokens.get(catalog)
  if (cache === undefined) tokens.set(catalog, (cache = new Map()))
  let token = cache.get(visible)
  if (token === undefined) {
    token = PREFIX + Buffer.concat([head(catalog), ...keys.map((k) => entry(catalog, k, all.get(k)!))]).toString("base64url")
    if (cache.size < 1024) cache.set(visible, token)
  }
  return token
}

/**
 * Whether a request carrying `token` may run against `catalog`: every definition it touches
 * is in the token at its current version. A touched definition the catalog does not define
 * is judged elsewhere (an unknown definition), so it is not checked here.
 */
export const admits = (catalog: Catalog, token: string, touched: ReadonlyArray<Touched>): boolean => {
  if (token === catalog.token) return true
  if (!token.startsWith(PREFIX)) return false
  const bytes = Buffer.from(token.slice(PREFIX.length), "base64url")
  if (bytes.length < HEAD || (bytes.length - HEAD) % WIDTH !== 0 || !bytes.subarray(0, HEAD).equals(head(catalog))) return false
  const held = new Set<string>()
  for (let i = HEAD; i < bytes.length; i += WIDTH) held.add(bytes.subarray(i, i + WIDTH).toString("hex"))
  const all = versionsOf(catalog)
  for (const t of touched) {
    const key = keyOf(t)
    const version = all.get(key)
    if (version === undefined || version === FIRST) continue
    if (!held.has(entry(catalog, key, version).toString("hex"))) return false
  }
  return true
}

/**
 * The entities a query document touches: its source, and every entity a relationship path
 * (in `select`, `where` or `order`) passes through. Paths are found wherever the document
 * holds a `path` array, so new clauses are covered without listing them here.
 */
export const touchedByQuery = (catalog: Catalog, document: { readonly from: { readonly name: string } }): ReadonlyArray<Touched> => {
  const names = new Set<string>([document.from.name])
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) walk(item)
      return
    }
    if (value === null || typeof value !== "object") return
    const path = (value as { readonly path?: unknown }).path
    if (Array.isArray(path) && path.every((p) => typeof p === "string")) {
      let current = catalog.entity(document.from.name)
      for (const segment of path.slice(0, -1) as ReadonlyArray<string>) {
        const rel = current?.relationship(segment)
        if (!rel) break
        names.add(rel.target)
        current = catalog.entity(rel.target)
      }
    }
    for (const v of Object.values(value)) walk(v)
  }
  walk(document)
  return [...names].map(entity)
}

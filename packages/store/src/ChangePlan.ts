/**
 * The change plan: what a new catalog would do to the data a database already holds.
 * The install record keeps a description of every entity as it was installed (fields,
 * stored types, nullability, literal sets and the value constraints of each field's
 * schema); comparing it with the new catalog classifies every change:
 *
 * - `additive`: a new entity, a new optional field, a new or dropped index, a new literal
 *   in a union, a relaxed constraint, a required field becoming optional. Applied.
 * - `validate`: a tightened or otherwise changed constraint, a field becoming required, a
 *   new required field. Accepted only when no stored row violates it, which a scan of the
 *   database counts (counts only, never values).
 * - `incompatible`: a changed stored type, a removed entity or field (a rename is a removal
 *   plus an addition), a narrowed union. Refused unless a declared migration covers it. A
 *   covered change of stored type is also refused while any stored value would be lost: the
 *   plan runs the migration's conversion over every stored value and counts what converts,
 *   unless a migration names the field in its `discards`.
 *
 * Nothing here writes: `Install` applies an accepted plan inside its transaction.
 */
import { type SqlClient } from "@effect/sql"
import { Effect, Either, Schema, SchemaAST } from "effect"
import { type Catalog, type CompiledEntity, type CompiledField, type JsonSchemaObject } from "@cairn/catalog/Catalog"
import { canonicalJson } from "@cairn/catalog/Digest"
import * as Layout from "./Layout.js"

const Literal = Schema.Union(Schema.String, Schema.Number, Schema.Boolean)
const StoredField = Schema.Struct({
  name: Schema.String,
  column: Schema.String,
  nullable: Schema.Boolean,
  literals: Schema.optional(Schema.Array(Literal)),
  /** The value constraints of the field's schema (its JSON Schema); absent in records from before plans. */
  schema: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
const StoredEntity = Schema.Struct({
  name: Schema.String,
  fields: Schema.Array(StoredField),
  indexes: Schema.Array(Schema.Struct({ name: Schema.String, fields: Schema.Array(Schema.String) }))
})
/** What a database's tables mean: the per-definition description the install record keeps. */
export const Representation = Schema.Struct({
  entities: Schema.Array(StoredEntity),
  /** Migrations applied to this database, in order (absent before migrations existed). */
  migrations: Schema.optional(Schema.Array(Schema.String))
})
export type Representation = typeof Representation.Type
export type StoredField = typeof StoredField.Type

export const decodeRepresentation = Schema.decodeUnknown(Schema.parseJson(Representation))

const describeField = (f: CompiledField): StoredField => ({
  name: f.name,
  column: f.column,
  nullable: f.nullable,
  ...(f.literals ? { literals: f.literals } : {}),
  schema: f.jsonSchema
})

/** The description of a catalog's entities, as the install record stores it. */
export const representationOf = (catalog: Catalog, migrations: ReadonlyArray<string> = []): Representation => ({
  entities: catalog.entities.map((e) => ({
    name: e.name,
    fields: e.fields.map(describeField),
    indexes: e.indexes.map((ix) => ({ name: ix.name, fields: ix.fields }))
  })),
  ...(migrations.length > 0 ? { migrations } : {})
})

export type ChangeKind = "additive" | "validate" | "incompatible"

export interface Change {
  readonly kind: ChangeKind
  readonly entity: string
  readonly field?: string
  /** One line, naming the definition and what changes; never a stored value. */
  readonly summary: string
  /**
   * What a covering migration still needs of the stored rows: `retype` (the column starts
   * empty under its new type, so a required field needs an empty table) or `narrow` (no stored
   * value may be outside the new literal set).
   */
  readonly covered?: "retype" | "narrow"
}

/** A change with its verdict for one database. */
export interface PlannedChange extends Change {
  /** For `validate`: how many stored rows violate the new definition (a covered retype: rows left without a required value). */
  readonly offending?: number
  /** For a covered retype: the stored values its migration's conversion turns into valid new values. */
  readonly converted?: number
  /** For a covered retype: the stored values that would be lost (no conversion, or one that fails). */
  readonly lost?: number
  /** For a covered retype: the loss is accepted by a migration that names the field in its `discards`. */
  readonly discardedBy?: string
  /** For a covered removal: the stored values (a field's non-null values, an entity's rows) it drops. */
  readonly dropped?: number
  /** For `incompatible`: the migration that covers it, if any. */
  readonly coveredBy?: string
  /** Whether this change stops the catalog from being installed over this database. */
  readonly refused: boolean
}

const ignoredKeywords = new Set(["description", "title", "$id", "examples", "default", "identifier"])
const upperBounds = new Set(["maxLength", "maximum", "exclusiveMaximum", "maxItems"])
const lowerBounds = new Set(["minLength", "minimum", "exclusiveMinimum", "minItems"])
const literalKeywords = new Set(["enum", "const", "anyOf", "type"])

/** The constraint keywords of a field's JSON Schema, without prose and (for literal fields) the literal set. */
const constraints = (schema: JsonSchemaObject, literal: boolean): Record<string, unknown> =>
  Object.fromEntries(Object.entries(schema).filter(([k]) => !ignoredKeywords.has(k) && !(literal && literalKeywords.has(k))))

/** `same`, `relaxed` (every value valid before is still valid), or `changed` (a scan decides). */
const compareConstraints = (before: Record<string, unknown>, after: Record<string, unknown>): "same" | "relaxed" | "changed" => {
  if (canonicalJson(before) === canonicalJson(after)) return "same"
  for (const [key, value] of Object.entries(after)) {
    const was = before[key]
    if (was === undefined) return "changed"
    if (canonicalJson(was) === canonicalJson(value)) continue
    if (typeof was !== "number" || typeof value !== "number") return "changed"
    if (upperBounds.has(key) ? value < was : lowerBounds.has(key) ? value > was : true) return "changed"
  }
  return "relaxed"
}

const describeConstraints = (c: Record<string, unknown>) =>
  Object.keys(c).length === 0 ? "none" : Object.keys(c).sort().map((k) => `${k} ${canonicalJson(c[k])}`).join(", ")

/** Only the keywords that differ: `maxLength 100 → 10`. */
const describeDifference = (before: Record<string, unknown>, after: Record<string, unknown>) =>
  [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .sort()
    .filter((k) => canonicalJson(before[k] ?? null) !== canonicalJson(after[k] ?? null))
    .map((k) => `${k} ${before[k] === undefined ? "none" : canonicalJson(before[k])} → ${after[k] === undefined ? "none" : canonicalJson(after[k])}`)
    .join(", ")

/** Every change from the installed description to `catalog`, in definition order. */
export const diff = (installed: Representation, catalog: Catalog): ReadonlyArray<Change> => {
  const changes: Array<Change> = []
  for (const old of installed.entities) {
    const entity = catalog.entity(old.name)
    if (!entity) {
      changes.push({ kind: "incompatible", entity: old.name, summary: `entity "${old.name}" was removed; its table holds its records` })
      continue
    }
    for (const was of old.fields) {
      const where = `field "${old.name}.${was.name}"`
      const now = entity.field(was.name)
      if (!now) {
        changes.push({ kind: "incompatible", entity: old.name, field: was.name, summary: `${where} was removed (or renamed)` })
        continue
      }
      if (now.column !== was.column) {
        changes.push({ kind: "incompatible", entity: old.name, field: was.name, summary: `${where} changed its stored type from ${was.column} to ${now.column}`, covered: "retype" })
        continue
      }
      const oldLiterals = was.literals
      const newLiterals = now.literals
      if (oldLiterals || newLiterals) {
        const removed = (oldLiterals ?? []).filter((l) => !(newLiterals ?? []).includes(l))
        const added = (newLiterals ?? []).filter((l) => !(oldLiterals ?? []).includes(l))
        if (oldLiterals && !newLiterals) {
          changes.push({ kind: "additive", entity: old.name, field: was.name, summary: `${where} no longer restricts its values to a set of literals` })
        } else if (!oldLiterals && newLiterals) {
          changes.push({ kind: "incompatible", entity: old.name, field: was.name, summary: `${where} is now restricted to the literals ${canonicalJson(newLiterals)}`, covered: "narrow" })
        } else if (removed.length > 0) {
          changes.push({ kind: "incompatible", entity: old.name, field: was.name, summary: `${where} narrowed its union: ${canonicalJson(removed)} removed`, covered: "narrow" })
        } else if (added.length > 0) {
          changes.push({ kind: "additive", entity: old.name, field: was.name, summary: `${where} accepts new literals ${canonicalJson(added)}` })
        }
      }
      if (now.nullable !== was.nullable) {
        changes.push(
          now.nullable
            ? { kind: "additive", entity: old.name, field: was.name, summary: `${where} became optional` }
            : { kind: "validate", entity: old.name, field: was.name, summary: `${where} became required` }
        )
      }
      const literal = oldLiterals !== undefined || newLiterals !== undefined
      const after = constraints(now.jsonSchema, literal)
      if (was.schema === undefined) {
        // Installed before constraints were recorded: whatever they were, a scan decides.
        if (Object.keys(after).filter((k) => k !== "type").length > 0) {
          changes.push({ kind: "validate", entity: old.name, field: was.name, summary: `${where} has constraints (${describeConstraints(after)}) the install record cannot compare` })
        }
        continue
      }
      const before = constraints(was.schema, literal)
      const compared = compareConstraints(before, after)
      if (compared === "relaxed") {
        changes.push({ kind: "additive", entity: old.name, field: was.name, summary: `${where} relaxed its constraints (${describeDifference(before, after)})` })
      } else if (compared === "changed") {
        changes.push({ kind: "validate", entity: old.name, field: was.name, summary: `${where} changed its constraints (${describeDifference(before, after)})` })
      }
    }
    for (const field of entity.fields) {
      if (old.fields.some((f) => f.name === field.name)) continue
      changes.push(
        field.nullable
          ? { kind: "additive", entity: old.name, field: field.name, summary: `field "${old.name}.${field.name}" is new and optional` }
          : { kind: "validate", entity: old.name, field: field.name, summary: `field "${old.name}.${field.name}" is new and required (existing rows have no value)` }
      )
    }
    for (const ix of entity.indexes) {
      if (!old.indexes.some((o) => o.name === ix.name)) changes.push({ kind: "additive", entity: old.name, summary: `index ${ix.name} is new` })
    }
    for (const ix of old.indexes) {
      if (!entity.indexes.some((n) => n.name === ix.name)) changes.push({ kind: "additive", entity: old.name, summary: `index ${ix.name} is dropped` })
    }
  }
  for (const entity of catalog.entities) {
    if (!installed.entities.some((e) => e.name === entity.name)) {
      changes.push({ kind: "additive", entity: entity.name, summary: `entity "${entity.name}" is new` })
    }
  }
  return changes
}

/** What a migration declares it covers: `Entity` (the entity and all its fields) or `Entity.field`. */
export interface Coverage {
  readonly migration: string
  readonly covers: ReadonlyArray<string>
  /** Per retyped field (`Entity.field`): its stored value, old type → new type (see `@cairn/catalog/Migration`). */
  readonly convert?: Readonly<Record<string, (stored: unknown) => unknown>>
  /** Fields or entities whose stored values the migration knowingly drops. */
  readonly discards?: ReadonlyArray<string>
}

const coveredBy = (change: Change, coverage: ReadonlyArray<Coverage>): string | undefined =>
  coverage.find((c) => c.covers.includes(change.entity) || (change.field !== undefined && c.covers.includes(`${change.entity}.${change.field}`)))
    ?.migration

const conversionOf = (change: Change, coverage: ReadonlyArray<Coverage>) => {
  const key = `${change.entity}.${change.field}`
  for (const c of coverage) {
    const fn = c.convert?.[key]
    if (fn !== undefined) return { migration: c.migration, fn }
  }
  return undefined
}

const discardedBy = (change: Change, coverage: ReadonlyArray<Coverage>): string | undefined =>
  coverage.find((c) => (c.discards ?? []).some((d) => d === change.entity || d === `${change.entity}.${change.field}`))?.migration

/** A value as its old stored type held it, in plain JSON form (what a conversion receives). */
const readStored = (was: StoredField, value: unknown): unknown => {
  if (value === null || value === undefined) return null
  if (was.column === "boolean") return value === 1 || value === 1n || value === true
  if (typeof value === "bigint") return Number(value)
  if (typeof value === "string" && was.schema !== undefined && (was.schema as { readonly type?: unknown }).type === "object") {
    // A file reference (stored as JSON text).
    try {
      return JSON.parse(value) as unknown
    } catch {
      return value
    }
  }
  return value
}

/** What a covered retype does to one table's stored values, and the new column values it writes. */
export interface Conversion {
  readonly change: Change
  readonly field: CompiledField
  /** Stored (non-null) values its conversion turns into valid values of the new type. */
  readonly converted: number
  /** Stored (non-null) values that would be lost. */
  readonly lost: number
  /** Rows left without a value though the new field is required. */
  readonly missing: number
  /** `[id, new stored value]` of every converted row. */
  readonly values: ReadonlyArray<readonly [string, Layout.Stored]>
}

/**
 * Runs every covered retype's conversion over the stored values (one read of the column per
 * change): counts what converts and what would be lost. Values never leave this function but
 * as the new column values install writes.
 */
export const conversions = (
  sql: SqlClient.SqlClient,
  installed: Representation,
  catalog: Catalog,
  changes: ReadonlyArray<Change>,
  coverage: ReadonlyArray<Coverage>
) =>
  Effect.gen(function* () {
    const out = new Map<Change, Conversion>()
    for (const change of changes) {
      if (change.covered !== "retype" || change.field === undefined || coveredBy(change, coverage) === undefined) continue
      const field = catalog.entity(change.entity)!.field(change.field)!
      const was = installed.entities.find((e) => e.name === change.entity)!.fields.find((f) => f.name === change.field)!
      const present = (yield* sql.unsafe<{ readonly n: number }>(`SELECT count(*) AS n FROM pragma_table_info(?) WHERE name = ?`, [change.entity, was.name]))[0]
      const rows = Number(present?.n ?? 0) > 0
        ? yield* sql.unsafe<{ readonly id: string; readonly v: unknown }>(`SELECT "id" AS id, ${Layout.quote(was.name)} AS v FROM ${Layout.tableName(change.entity)}`)
        : (yield* sql.unsafe<{ readonly id: string }>(`SELECT "id" AS id FROM ${Layout.tableName(change.entity)}`)).map((r) => ({ id: r.id, v: null }))
      const conversion = conversionOf(change, coverage)
      const isValid = validator(field.schema)
      let converted = 0
      let lost = 0
      let missing = 0
      const values: Array<readonly [string, Layout.Stored]> = []
      for (const row of rows) {
        const old = readStored(was, row.v)
        let next: unknown = null
        if (old !== null && conversion !== undefined) {
          try {
            next = conversion.fn(old)
          } catch {
            next = undefined
          }
          if (next === undefined || next === null || !isValid(next)) next = undefined
        }
        if (old !== null) {
          if (next === undefined || next === null) lost++
          else {
            converted++
            values.push([row.id, Layout.encodeValue(field, next)])
          }
        }
        if ((next === undefined || next === null) && !field.nullable) missing++
      }
      out.set(change, { change, field, converted, lost, missing, values })
    }
    return out
  })

const transforms = (ast: SchemaAST.AST): boolean =>
  SchemaAST.isTransformation(ast) ||
  (SchemaAST.isRefinement(ast) && transforms(ast.from)) ||
  (SchemaAST.isUnion(ast) && ast.types.some(transforms)) ||
  (SchemaAST.isSuspend(ast) && transforms(ast.f()))

/**
 * Whether a stored (encoded) value is accepted: a type guard when the schema does not
 * transform (stored and decoded forms are the same, and no error is built for a bad value),
 * else a decode.
 */
const validator = (schema: Schema.Schema<any, any>): ((value: unknown) => boolean) => {
  if (!transforms(schema.ast)) return Schema.is(schema)
  const decode = Schema.decodeUnknownEither(schema)
  return (value) => Either.isRight(decode(value))
}

/**
 * Counts, for every `validate` change, the stored rows the new definition rejects: a NULL
 * where a value is now required, or a value its schema no longer accepts. One read of
 * each affected table; values are decoded in memory and never leave this function.
 */
export const scan = (
  sql: SqlClient.SqlClient,
  catalog: Catalog,
  changes: ReadonlyArray<Change>,
  include: (change: Change) => boolean = (change) => change.kind === "validate"
) =>
  Effect.gen(function* () {
    const counts = new Map<Change, number>()
    const byEntity = new Map<string, Array<Change>>()
    for (const change of changes) {
      if (!include(change) || change.field === undefined) continue
      byEntity.set(change.entity, [...(byEntity.get(change.entity) ?? []), change])
      counts.set(change, 0)
    }
    for (const [name, entityChanges] of byEntity) {
      const entity = catalog.entity(name)!
      const present = new Set(
        (yield* sql.unsafe<{ readonly name: string }>(`SELECT name FROM pragma_table_info(?)`, [name])).map((r) => r.name)
      )
      const checks = entityChanges.map((change) => {
        const field = entity.field(change.field!)!
        const isValid = validator(field.schema)
        // A retyped column starts empty: every row counts when the field is required.
        return { change, field, stored: change.covered !== "retype" && present.has(field.name), isValid }
      })
      const columns = checks.filter((c) => c.stored).map((c) => Layout.quote(c.field.name))
      const rows = yield* sql.unsafe<Record<string, unknown>>(
        `SELECT ${columns.length > 0 ? columns.join(", ") : "1 AS one"} FROM ${Layout.tableName(name)}`
      )
      for (const row of rows) {
        for (const check of checks) {
          const value = check.stored ? Layout.decodeValue(check.field, row[check.field.name]) : null
          const bad = value === null ? !check.field.nullable : !check.isValid(value)
          if (bad) counts.set(check.change, counts.get(check.change)! + 1)
        }
      }
    }
    return counts
  })

/**
 * The verdict of every change for one database: `validate` changes by the scan's counts,
 * `incompatible` ones by the declared migrations' coverage.
 */
export const judge = (sql: SqlClient.SqlClient, installed: Representation, catalog: Catalog, coverage: ReadonlyArray<Coverage> = []) =>
  Effect.gen(function* () {
    const changes = diff(installed, catalog)
    const covering = new Map(changes.flatMap((c) => (c.kind === "incompatible" ? [[c, coveredBy(c, coverage)] as const] : [])))
    // Covered narrowings still need the stored rows to fit: counted by the same scan.
    const counts = yield* scan(sql, catalog, changes, (c) => c.kind === "validate" || (c.covered === "narrow" && covering.get(c) !== undefined))
    // Covered retypes: every stored value is converted, or the loss is declared.
    const converted = yield* conversions(sql, installed, catalog, changes, coverage)
    // Covered removals are accepted (naming the removed definition is explicit), and say what they drop.
    const dropped = new Map<Change, number>()
    for (const change of changes) {
      if (change.kind !== "incompatible" || change.covered !== undefined || covering.get(change) === undefined) continue
      const columns = (yield* sql.unsafe<{ readonly name: string }>(`SELECT name FROM pragma_table_info(?)`, [change.entity])).map((r) => r.name)
      if (columns.length === 0 || (change.field !== undefined && !columns.includes(change.field))) continue
      const where = change.field === undefined ? "" : ` WHERE ${Layout.quote(change.field)} IS NOT NULL`
      const counted = yield* sql.unsafe<{ readonly n: number }>(`SELECT count(*) AS n FROM ${Layout.tableName(change.entity)}${where}`)
      dropped.set(change, Number(counted[0]?.n ?? 0))
    }
    return changes.map((change): PlannedChange => {
      if (change.kind === "validate") {
        const offending = counts.get(change) ?? 0
        return { ...change, offending, refused: offending > 0 }
      }
      if (change.kind === "incompatible") {
        const migration = covering.get(change)
        if (migration === undefined) return { ...change, refused: true }
        const conversion = converted.get(change)
        if (conversion !== undefined) {
          const discarded = discardedBy(change, coverage)
          return {
            ...change,
            coveredBy: migration,
            offending: conversion.missing,
            converted: conversion.converted,
            lost: conversion.lost,
            ...(discarded !== undefined ? { discardedBy: discarded } : {}),
            refused: conversion.missing > 0 || (conversion.lost > 0 && discarded === undefined)
          }
        }
        const offending = counts.get(change) ?? 0
        const gone = dropped.get(change)
        return { ...change, coveredBy: migration, ...(change.covered ? { offending } : {}), ...(gone !== undefined ? { dropped: gone } : {}), refused: offending > 0 }
      }
      return { ...change, refused: false }
    })
  })

/** One line per change, for operators: the verdict, the change and, for a scan, its count (never values). */
export const describeChange = (change: PlannedChange): string => {
  switch (change.kind) {
    case "additive":
      return `additive: ${change.summary}`
    case "validate":
      return change.refused
        ? `refused (needs validation): ${change.summary}: ${change.offending} stored ${change.offending === 1 ? "row violates" : "rows violate"} it`
        : `validated: ${change.summary}: every stored row satisfies it`
    case "incompatible":
      if (change.coveredBy !== undefined && change.lost !== undefined) {
        const where = `"${change.entity}.${change.field}"`
        const values = (n: number) => `${n} stored ${n === 1 ? "value" : "values"}`
        const convertedPart = change.converted! > 0 ? `; ${values(change.converted!)} converted` : ""
        if (change.offending! > 0) {
          return `refused (migration "${change.coveredBy}" cannot cover it yet): ${change.summary}: ${change.offending} stored ${change.offending === 1 ? "row" : "rows"} would have no value for the required field${convertedPart} (convert every value, or make it optional first)`
        }
        if (change.lost! > 0 && change.discardedBy === undefined) {
          return `refused (would lose data): ${change.summary}: ${values(change.lost!)} would be lost${convertedPart}; give a migration a conversion for ${where} (convert) that handles every stored value, or name ${where} in its discards to drop them knowingly`
        }
        return `migrated: ${change.summary} (covered by migration "${change.coveredBy}"): ${values(change.converted!)} converted${change.lost! > 0 ? `, ${values(change.lost!)} discarded as migration "${change.discardedBy}" declares` : ""}`
      }
      if (change.coveredBy !== undefined && change.refused) {
        return `refused (migration "${change.coveredBy}" cannot cover it yet): ${change.summary}: ${change.offending} stored ${change.offending === 1 ? "row" : "rows"} would not fit (${change.covered === "retype" ? "a retyped required field starts empty; make it optional first" : "migrate them to an allowed value first"})`
      }
      return change.refused
        ? `refused (incompatible): ${change.summary}; declare a migration that covers "${change.field === undefined ? change.entity : `${change.entity}.${change.field}`}"`
        : `migrated: ${change.summary} (covered by migration "${change.coveredBy}")${
            change.dropped !== undefined && change.dropped > 0
              ? `: drops ${change.dropped} stored ${change.field === undefined ? (change.dropped === 1 ? "row" : "rows") : change.dropped === 1 ? "value" : "values"}`
              : ""
          }`
  }
}

/**
 * The DDL that brings the tables to `catalog` once the plan is accepted. A table whose
 * column definitions changed (nullability, literal set, a removed covered field, a new
 * required field) is rebuilt: SQLite cannot alter a column's constraints in place.
 */
/** The temp table a rebuild reads converted values from (see `Install`): `(entity, field, id, v)`. */
export const convertedTable = "_cairn_converted"

export const statements = (installed: Representation, catalog: Catalog, converted: ReadonlyArray<string> = []): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const old of installed.entities) {
    const entity = catalog.entity(old.name)
    if (!entity) {
      out.push(`DROP TABLE IF EXISTS ${Layout.tableName(old.name)}`)
      continue
    }
    const rebuild =
      old.fields.some((was) => {
        const now = entity.field(was.name)
        return now === undefined || now.column !== was.column || now.nullable !== was.nullable || canonicalJson(now.literals ?? null) !== canonicalJson(was.literals ?? null)
      }) || entity.fields.some((f) => !f.nullable && !old.fields.some((o) => o.name === f.name))
    for (const ix of old.indexes) {
      if (!entity.indexes.some((n) => n.name === ix.name)) out.push(`DROP INDEX IF EXISTS ${Layout.quote(ix.name)}`)
    }
    // A field whose stored type changed (a covered migration) starts empty: its old values cannot be read as the new type.
    // A converted one is filled from its conversion's values (`convertedTable`).
    if (rebuild) {
      out.push(
        ...rebuildTable(
          entity,
          old.fields.filter((f) => entity.field(f.name)?.column === f.column).map((f) => f.name),
          entity.fields.filter((f) => converted.includes(`${entity.name}.${f.name}`)).map((f) => f.name)
        )
      )
    }
    else {
      for (const field of entity.fields) {
        if (!old.fields.some((f) => f.name === field.name)) {
          out.push(`ALTER TABLE ${Layout.tableName(entity)} ADD COLUMN ${Layout.columnDefinition(field)}`)
        }
      }
    }
    // Creating the table is a no-op; this creates its indexes.
    out.push(...Layout.entityDdl(entity))
  }
  for (const entity of catalog.entities) {
    if (!installed.entities.some((e) => e.name === entity.name)) out.push(...Layout.entityDdl(entity))
  }
  return out
}

const rebuildTable = (entity: CompiledEntity, oldFields: ReadonlyArray<string>, convertedFields: ReadonlyArray<string>): ReadonlyArray<string> => {
  const temp = Layout.quote(`_cairn_rebuild_${entity.name}`)
  const kept = ["id", ...entity.fields.filter((f) => oldFields.includes(f.name)).map((f) => f.name)].map(Layout.quote)
  const convertedFrom = (field: string) =>
    `(SELECT c."v" FROM temp.${convertedTable} c WHERE c."entity" = '${entity.name.replace(/'/g, "''")}' AND c."field" = '${field.replace(/'/g, "''")}' AND c."id" = src."id")`
  const columns = [...kept, ...convertedFields.map(Layout.quote)]
  const sources = [...kept.map((c) => `src.${c}`), ...convertedFields.map(convertedFrom)]
  return [
    `DROP TABLE IF EXISTS ${temp}`,
    `CREATE TABLE ${temp} (${[`"id" TEXT PRIMARY KEY NOT NULL`, ...entity.fields.map(Layout.columnDefinition)].join(", ")}) STRICT, WITHOUT ROWID`,
    `INSERT INTO ${temp} (${columns.join(", ")}) SELECT ${sources.join(", ")} FROM ${Layout.tableName(entity)} src`,
    `DROP TABLE ${Layout.tableName(entity)}`,
    `ALTER TABLE ${temp} RENAME TO ${Layout.tableName(entity)}`
  ]
}

/**
 * Compiles a root schema into an immutable `Catalog`: exact references, stored
 * representations, JSON Schemas for discovery, the declared migrations, and `token`, an
 * opaque digest of every definition and the policy, stable across restarts (install
 * records and backups name it). What clients hold is a view's token, a version per
 * definition (`CatalogVersion`), which survives additive changes.
 */
import { Effect, JSONSchema, Schema, SchemaAST as AST } from "effect"
import { fieldOperators } from "@cairn/domain/QueryDocument"
import { type OperationRef } from "@cairn/domain/References"
import { CatalogError } from "./CatalogError.js"
import type { Deprecation, Entity } from "./Entity.js"
import { digest } from "./Digest.js"
import { analyze, type ColumnType } from "./internal/storedType.js"
import type { Migration } from "./Migration.js"
import type * as Operation from "./Operation.js"
import type { RootSchema } from "./RootSchema.js"

export type { ColumnType } from "./internal/storedType.js"

export type JsonSchemaObject = Readonly<Record<string, unknown>>

export interface CompiledField {
  readonly name: string
  readonly column: ColumnType
  readonly nullable: boolean
  readonly literals?: ReadonlyArray<string | number | boolean>
  /** Validates and decodes one non-null value of this field. */
  readonly schema: Schema.Schema<any, any>
  readonly jsonSchema: JsonSchemaObject
  readonly indexed: boolean
  readonly trait?: string
  readonly operators: ReadonlyArray<string>
  readonly deprecated?: Deprecation
  /** A file reference (`File.File`), stored as JSON text: filters take only `isNull`. */
  readonly file?: true
}

export interface CompiledRelationship {
  readonly name: string
  readonly target: string
  readonly via: string
}

export interface CompiledIndex {
  readonly name: string
  readonly fields: ReadonlyArray<string>
}

export interface CompiledEntity {
  readonly name: string
  readonly description: string
  readonly fields: ReadonlyArray<CompiledField>
  readonly relationships: ReadonlyArray<CompiledRelationship>
  readonly indexes: ReadonlyArray<CompiledIndex>
  readonly traits: ReadonlyArray<string>
  readonly operations: ReadonlyArray<string>
  readonly deprecated?: Deprecation
  readonly definition: Entity<string, any>
  readonly field: (name: string) => CompiledField | undefined
  readonly relationship: (name: string) => CompiledRelationship | undefined
}

export interface CompiledTrait {
  readonly name: string
  readonly description: string
  readonly fields: ReadonlyArray<{ readonly name: string; readonly jsonSchema: JsonSchemaObject }>
  readonly entities: ReadonlyArray<string>
}

export interface CompiledOperation {
  readonly ref: OperationRef
  readonly owner: string
  readonly name: string
  readonly description: string
  readonly targeted: boolean
  readonly input: Schema.Schema<any, any>
  readonly output: Schema.Schema<any, any>
  readonly inputJsonSchema: JsonSchemaObject
  readonly outputJsonSchema: JsonSchemaObject
  readonly deprecated?: Deprecation
  readonly definition: Operation.Any
}

const ENTITY_NAME = /^[A-Z][A-Za-z0-9]{0,63}$/
const MEMBER_NAME = /^[a-z][A-Za-z0-9]{0,63}$/
const ROOT_NAME = /^[a-z][a-z0-9_-]{0,63}$/

const operatorsFor = (column: ColumnType, nullable: boolean, enumerated: boolean): ReadonlyArray<string> =>
  fieldOperators(column, { nullable, enumerated })

/**
 * JSON Schema for discovery, in the dialect MCP uses (2020-12) so one schema serves every
 * transport, without the `$schema` header every one would repeat.
 */
export const jsonSchemaOf = (schema: Schema.Schema<any, any>): JsonSchemaObject => {
  const { $schema: _, ...rest } = JSONSchema.make(schema, { target: "jsonSchema2020-12" }) as unknown as Record<string, unknown>
  return rest
}

const tryJsonSchema = (schema: Schema.Schema<any, any>): JsonSchemaObject | undefined => {
  try {
    return jsonSchemaOf(schema)
  } catch {
    return undefined
  }
}

export class Catalog {
  readonly token: string
  private readonly entityIndex: ReadonlyMap<string, CompiledEntity>
  private readonly traitIndex: ReadonlyMap<string, CompiledTrait>
  private readonly operationIndex: ReadonlyMap<string, CompiledOperation>

  constructor(
    readonly name: string,
    readonly entities: ReadonlyArray<CompiledEntity>,
    readonly traits: ReadonlyArray<CompiledTrait>,
    readonly operations: ReadonlyArray<CompiledOperation>,
    /** Digest of every definition a client relies on. */
    readonly definitionsDigest: string,
    /** Digest of the stored representation only: what installation validates against. */
    readonly fingerprint: string,
    /** Digest of the compiled policy, once one is attached. */
    readonly policyDigest: string = "",
    /** The root schema's explicit migrations, in order. */
    readonly migrations: ReadonlyArray<Migration> = []
  ) {
    this.token = digest({ v: 1, definitions: definitionsDigest, policy: policyDigest }).slice(0, 24)
    this.entityIndex = new Map(entities.map((e) => [e.name, e]))
    this.traitIndex = new Map(traits.map((t) => [t.name, t]))
    this.operationIndex = new Map(operations.map((o) => [`${o.owner}.${o.name}`, o]))
  }

  entity(name: string): CompiledEntity | undefined {
    return this.entityIndex.get(name)
  }
  trait(name: string): CompiledTrait | undefined {
    return this.traitIndex.get(name)
  }
  operation(owner: string, name: string): CompiledOperation | undefined {
    return this.operationIndex.get(`${owner}.${name}`)
  }

  /** The same definitions with other declared migrations (which version the entities they cover). */
  withMigrations(migrations: ReadonlyArray<Migration>): Catalog {
    return new Catalog(this.name, this.entities, this.traits, this.operations, this.definitionsDigest, this.fingerprint, this.policyDigest, migrations)
  }

  /** The same definitions under a token that also covers the compiled policy. */
  withPolicyDigest(policyDigest: string): Catalog {
    return new Catalog(
      this.name,
      this.entities,
      this.traits,
      this.operations,
      this.definitionsDigest,
      this.fingerprint,
      policyDigest,
      this.migrations
    )
  }
}

const byName = <A extends { readonly name: string }>(a: A, b: A) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

const structMembers = (fields: Schema.Struct.Fields) => {
  const ast = Schema.Struct(fields).ast
  return AST.isTypeLiteral(ast) ? ast.propertySignatures : undefined
}

/** Compiles a root schema; every problem is reported at once, each naming its definition. */
export const compile = (root: RootSchema): Effect.Effect<Catalog, CatalogError> =>
  Effect.suspend(() => {
    const problems: Array<string> = []
    if (!ROOT_NAME.test(root.name)) problems.push(`root schema "${root.name}": invalid name (lower case letters, digits, - or _)`)

    const traitDefs = new Map<string, RootSchema["traits"][number]>()
    for (const trait of root.traits) {
      if (!ENTITY_NAME.test(trait.name)) problems.push(`trait "${trait.name}": invalid name (PascalCase identifier)`)
      if (traitDefs.has(trait.name)) problems.push(`trait "${trait.name}": duplicate name`)
      traitDefs.set(trait.name, trait)
    }
    const entityDefs = new Map<string, Entity<string, any>>()
    for (const entity of root.entities) {
      if (!ENTITY_NAME.test(entity.name)) problems.push(`entity "${entity.name}": invalid name (PascalCase identifier)`)
      if (entityDefs.has(entity.name)) problems.push(`entity "${entity.name}": duplicate name`)
      if (traitDefs.has(entity.name)) problems.push(`entity "${entity.name}": name already used by a trait`)
      entityDefs.set(entity.name, entity)
    }

    // Operations first, so entities can list the operations they own.
    const operations: Array<CompiledOperation> = []
    const operationKeys = new Set<string>()
    for (const op of root.operations) {
      const where = `operation "${op.owner}.${op.name}"`
      if (!entityDefs.has(op.owner)) problems.push(`${where}: owner entity "${op.owner}" is not defined`)
      if (!MEMBER_NAME.test(op.name)) problems.push(`${where}: invalid name (camelCase identifier)`)
      if (operationKeys.has(`${op.owner}.${op.name}`)) problems.push(`${where}: duplicate name`)
      operationKeys.add(`${op.owner}.${op.name}`)
      if (op.description.trim() === "") problems.push(`${where}: description is empty`)
      if (!AST.isTypeLiteral(AST.encodedAST(op.input.ast))) problems.push(`${where}: input schema must be an object (Schema.Struct)`)
      const inputJsonSchema = tryJsonSchema(op.input)
      const outputJsonSchema = tryJsonSchema(op.output)
      if (!inputJsonSchema) problems.push(`${where}: input schema cannot be published as JSON Schema`)
      if (!outputJsonSchema) problems.push(`${where}: output schema cannot be published as JSON Schema`)
      operations.push({
        ref: { kind: "operation", owner: { kind: "entity", name: op.owner }, name: op.name },
        owner: op.owner,
        name: op.name,
        description: op.description,
        targeted: op.targeted,
        input: op.input,
        output: op.output,
        inputJsonSchema: inputJsonSchema ?? {},
        outputJsonSchema: outputJsonSchema ?? {},
        ...(op.deprecated ? { deprecated: op.deprecated } : {}),
        definition: op
      })
    }

    const traitEntities = new Map<string, Array<string>>()
    const entities: Array<CompiledEntity> = []
    for (const entity of root.entities) {
      const where = `entity "${entity.name}"`
      if (entity.description.trim() === "") problems.push(`${where}: description is empty`)
      const members = structMembers(entity.fields)
      if (!members) {
        problems.push(`${where}: fields must be plain schemas or Schema.optional (no defaults or renames)`)
        continue
      }
      const traitOf = new Map<string, string>()
      for (const t of entity.traits) {
        if (traitDefs.get(t.name) !== t) {
          problems.push(`${where}: declares trait "${t.name}", which is not in the root schema`)
          continue
        }
        traitEntities.set(t.name, [...(traitEntities.get(t.name) ?? []), entity.name])
        for (const f of Object.keys(t.fields)) traitOf.set(f, t.name)
      }
      const indexed = new Set<string>()
      const relationshipVias = Object.values(entity.relationships).map((r) => r.via)
      const declaredIndexes = [...entity.indexes]
      for (const via of relationshipVias) {
        if (!declaredIndexes.some((ix) => ix[0] === via)) declaredIndexes.push([via])
      }
      const fieldNames = new Set(members.map((m) => String(m.name)))
      const indexes: Array<CompiledIndex> = []
      const seenIndexes = new Set<string>()
      for (const ix of declaredIndexes) {
        if (ix.length === 0) {
          problems.push(`${where}: an index must name at least one field`)
          continue
        }
        const unknown = ix.filter((f) => !fieldNames.has(f))
        if (unknown.length > 0) {
          problems.push(`${where}: index over unknown field ${unknown.map((f) => `"${f}"`).join(", ")}`)
          continue
        }
        const key = ix.join(",")
        if (seenIndexes.has(key)) continue
        seenIndexes.add(key)
        indexed.add(ix[0]!)
        indexes.push({ name: `ix_${entity.name}_${ix.join("_")}`, fields: ix })
      }
      const fields: Array<CompiledField> = []
      for (const member of members) {
        const name = String(member.name)
        if (name === "id") {
          problems.push(`${where}: "id" is reserved for the server-generated record id`)
          continue
        }
        if (!MEMBER_NAME.test(name)) problems.push(`${where}: field "${name}" has an invalid name (camelCase identifier)`)
        const stored = analyze(member.type, member.isOptional)
        if (typeof stored === "string") {
          problems.push(`${where}: field "${name}": ${stored}`)
          continue
        }
        const schema = Schema.make(stored.core)
        const field: CompiledField = {
          name,
          column: stored.column,
          nullable: stored.nullable,
          ...(stored.literals ? { literals: stored.literals } : {}),
          schema,
          jsonSchema: tryJsonSchema(schema) ?? {},
          indexed: indexed.has(name),
          ...(traitOf.has(name) ? { trait: traitOf.get(name)! } : {}),
          ...(entity.deprecatedFields?.[name] ? { deprecated: entity.deprecatedFields[name]! } : {}),
          operators: stored.file
            ? stored.nullable ? ["isNull"] : []
            : operatorsFor(stored.column, stored.nullable, stored.literals !== undefined),
          ...(stored.file ? { file: true as const } : {})
        }
        fields.push(field)
      }
      const fieldIndex = new Map(fields.map((f) => [f.name, f]))
      for (const t of entity.traits) {
        if (traitDefs.get(t.name) !== t) continue
        const traitMembers = structMembers(t.fields) ?? []
        for (const tm of traitMembers) {
          const name = String(tm.name)
          const own = fieldIndex.get(name)
          const expected = analyze(tm.type, tm.isOptional)
          if (!own) {
            problems.push(`${where}: does not satisfy trait "${t.name}": missing field "${name}"`)
          } else if (typeof expected !== "string" && (own.column !== expected.column || own.nullable !== expected.nullable)) {
            problems.push(
              `${where}: does not satisfy trait "${t.name}": field "${name}" is stored as ${own.column}${own.nullable ? " (nullable)" : ""}, the trait requires ${expected.column}${expected.nullable ? " (nullable)" : ""}`
            )
          }
        }
      }
      const relationships: Array<CompiledRelationship> = []
      for (const [name, rel] of Object.entries(entity.relationships)) {
        if (!MEMBER_NAME.test(name)) problems.push(`${where}: relationship "${name}" has an invalid name (camelCase identifier)`)
        if (fieldNames.has(name)) problems.push(`${where}: relationship "${name}" has the same name as a field`)
        if (!entityDefs.has(rel.target)) problems.push(`${where}: relationship "${name}" targets unknown entity "${rel.target}"`)
        const via = fieldIndex.get(rel.via)
        if (!fieldNames.has(rel.via)) problems.push(`${where}: relationship "${name}" goes through unknown field "${rel.via}"`)
        else if (via && via.column !== "text") problems.push(`${where}: relationship "${name}" must go through a string id field`)
        relationships.push({ name, target: rel.target, via: rel.via })
      }
      relationships.sort(byName)
      const relationshipIndex = new Map(relationships.map((r) => [r.name, r]))
      entities.push({
        name: entity.name,
        description: entity.description,
        fields,
        relationships,
        indexes,
        traits: entity.traits.map((t) => t.name),
        operations: operations.filter((o) => o.owner === entity.name).map((o) => o.name).sort(),
        ...(entity.deprecated ? { deprecated: entity.deprecated } : {}),
        definition: entity,
        field: (n) => fieldIndex.get(n),
        relationship: (n) => relationshipIndex.get(n)
      })
    }

    // Deprecations name real replacements, so `describe` never points callers at nothing.
    for (const entity of root.entities) {
      const where = `entity "${entity.name}"`
      const fieldNames = new Set(Object.keys(entity.fields))
      if (entity.deprecated?.replacement !== undefined && !entityDefs.has(entity.deprecated.replacement)) {
        problems.push(`${where}: deprecated in favour of unknown entity "${entity.deprecated.replacement}"`)
      }
      for (const [field, deprecation] of Object.entries(entity.deprecatedFields ?? {})) {
        if (!fieldNames.has(field)) problems.push(`${where}: deprecates unknown field "${field}"`)
        if (deprecation.replacement !== undefined && !fieldNames.has(deprecation.replacement)) {
          problems.push(`${where}: field "${field}" is deprecated in favour of unknown field "${deprecation.replacement}"`)
        }
      }
    }
    for (const op of root.operations) {
      if (op.deprecated?.replacement !== undefined && !operationKeys.has(op.deprecated.replacement)) {
        problems.push(`operation "${op.owner}.${op.name}": deprecated in favour of unknown operation "${op.deprecated.replacement}"`)
      }
    }

    const traits: Array<CompiledTrait> = root.traits.map((t) => ({
      name: t.name,
      description: t.description,
      fields: (structMembers(t.fields) ?? []).map((m) => {
        const stored = analyze(m.type, m.isOptional)
        return {
          name: String(m.name),
          jsonSchema: typeof stored === "string" ? {} : (tryJsonSchema(Schema.make(stored.core)) ?? {})
        }
      }),
      entities: (traitEntities.get(t.name) ?? []).sort()
    }))

    if (problems.length > 0) return Effect.fail(new CatalogError({ problems }))

    entities.sort(byName)
    traits.sort(byName)
    operations.sort((a, b) => (a.owner === b.owner ? byName(a, b) : a.owner < b.owner ? -1 : 1))

    const definitionsDigest = digest({
      root: root.name,
      entities: entities.map((e) => ({
        name: e.name,
        description: e.description,
        fields: e.fields.map((f) => ({ name: f.name, column: f.column, nullable: f.nullable, schema: f.jsonSchema, ...(f.deprecated ? { deprecated: f.deprecated } : {}) })),
        ...(e.deprecated ? { deprecated: e.deprecated } : {}),
        relationships: e.relationships,
        indexes: e.indexes,
        traits: e.traits
      })),
      traits: traits.map((t) => ({ name: t.name, description: t.description, fields: t.fields })),
      operations: operations.map((o) => ({
        owner: o.owner,
        name: o.name,
        description: o.description,
        targeted: o.targeted,
        input: o.inputJsonSchema,
        output: o.outputJsonSchema,
        ...(o.deprecated ? { deprecated: o.deprecated } : {})
      }))
    })
    const fingerprint = digest({
      entities: entities.map((e) => ({
        name: e.name,
        fields: e.fields.map((f) => ({ name: f.name, column: f.column, nullable: f.nullable })),
        indexes: e.indexes
      }))
    })
    const migrationNames = new Set<string>()
    for (const m of root.migrations ?? []) {
      if (m.name.trim() === "") problems.push(`migration: a migration needs a name`)
      if (migrationNames.has(m.name)) problems.push(`migration "${m.name}": duplicate name`)
      migrationNames.add(m.name)
      const shape = (ref: string, fieldOnly: boolean) => {
        const [entity, field, ...rest] = ref.split(".")
        return rest.length === 0 && entity !== undefined && ENTITY_NAME.test(entity) && (field === undefined ? !fieldOnly : MEMBER_NAME.test(field))
      }
      for (const covered of m.covers) {
        if (!shape(covered, false)) problems.push(`migration "${m.name}": covers "${covered}", which is neither Entity nor Entity.field`)
      }
      for (const discarded of m.discards ?? []) {
        if (!shape(discarded, false)) problems.push(`migration "${m.name}": discards "${discarded}", which is neither Entity nor Entity.field`)
      }
      for (const [converted, fn] of Object.entries(m.convert ?? {})) {
        if (!shape(converted, true)) problems.push(`migration "${m.name}": converts "${converted}", which is not Entity.field`)
        else if (typeof fn !== "function") problems.push(`migration "${m.name}": its conversion of "${converted}" is not a function`)
        else if (!m.covers.some((c) => c === converted || c === converted.split(".")[0])) {
          problems.push(`migration "${m.name}": converts "${converted}" but does not cover it; add it to covers`)
        }
      }
    }
    if (problems.length > 0) return Effect.fail(new CatalogError({ problems }))
    return Effect.succeed(new Catalog(root.name, entities, traits, operations, definitionsDigest, fingerprint, "", root.migrations ?? []))
  })

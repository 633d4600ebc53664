/**
 * `describe`: browse, search or inspect the caller's visible catalog. Results are
 * concise cards (browse, search) or full definitions with JSON Schemas (inspect),
 * always with the catalog token to pass back as `ifCatalog`.
 */
import { Schema } from "effect"
import { DefinitionKind, DefinitionRef, EntityRef, OperationRef, TraitRef } from "./References.js"

export const DescribePage = Schema.Struct({
  limit: Schema.optional(Schema.Int.pipe(Schema.positive())),
  after: Schema.optional(Schema.String)
})

export const DescribeRequest = Schema.Struct({
  browse: Schema.optional(Schema.Struct({ kinds: Schema.Array(DefinitionKind).pipe(Schema.minItems(1)) })),
  search: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  inspect: Schema.optional(Schema.Array(DefinitionRef).pipe(Schema.minItems(1))),
  page: Schema.optional(DescribePage)
}).annotations({ identifier: "DescribeRequest" })
export type DescribeRequest = typeof DescribeRequest.Type

/**
 * A definition (or field) kept for old clients while its replacement is adopted: new code should
 * use `replacement`; it will be removed by a later release.
 */
export const Deprecation = Schema.Struct({
  reason: Schema.String,
  /** The name to use instead: an entity, a field of the same entity, or an operation `Owner.name`. */
  replacement: Schema.optional(Schema.String)
}).annotations({ identifier: "Deprecation" })
export type Deprecation = typeof Deprecation.Type

/** A concise card: enough to choose a definition, not its schemas. */
export const Card = Schema.Struct({
  ref: DefinitionRef,
  summary: Schema.String,
  deprecated: Schema.optional(Deprecation),
  /** Entities: visible field names. Traits: their field names. */
  fields: Schema.optional(Schema.Array(Schema.String)),
  /** Operations: whether a `target` record is required. */
  targeted: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "Card" })
export type Card = typeof Card.Type

export const JsonSchema = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type JsonSchema = typeof JsonSchema.Type

export const FieldDescription = Schema.Struct({
  schema: JsonSchema,
  nullable: Schema.Boolean,
  indexed: Schema.Boolean,
  /** Filter operators a query may apply to this field. */
  operators: Schema.Array(Schema.String),
  trait: Schema.optional(Schema.String),
  deprecated: Schema.optional(Deprecation)
})
export type FieldDescription = typeof FieldDescription.Type

export const RelationshipDescription = Schema.Struct({
  target: EntityRef,
  via: Schema.String,
  cardinality: Schema.Literal("one")
})

export const EntityDefinition = Schema.Struct({
  ref: EntityRef,
  description: Schema.String,
  id: JsonSchema,
  fields: Schema.Record({ key: Schema.String, value: FieldDescription }),
  relationships: Schema.Record({ key: Schema.String, value: RelationshipDescription }),
  indexes: Schema.Array(Schema.Array(Schema.String)),
  traits: Schema.Array(TraitRef),
  operations: Schema.Array(OperationRef),
  deprecated: Schema.optional(Deprecation)
})

export const TraitDefinition = Schema.Struct({
  ref: TraitRef,
  description: Schema.String,
  fields: Schema.Record({ key: Schema.String, value: JsonSchema }),
  entities: Schema.Array(EntityRef)
})

export const OperationDefinition = Schema.Struct({
  ref: OperationRef,
  description: Schema.String,
  targeted: Schema.Boolean,
  input: JsonSchema,
  output: JsonSchema,
  deprecated: Schema.optional(Deprecation)
})

export const Definition = Schema.Union(EntityDefinition, TraitDefinition, OperationDefinition)
export type Definition = typeof Definition.Type

export const DescribeResult = Schema.Struct({
  catalogToken: Schema.String,
  cards: Schema.Array(Card),
  definitions: Schema.optional(Schema.Array(Definition)),
  cursor: Schema.optional(Schema.String)
}).annotations({ identifier: "DescribeResult" })
export type DescribeResult = typeof DescribeResult.Type

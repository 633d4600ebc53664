/**
 * QueryDocumentV1: one bounded read of one entity, as JSON. The filter language here
 * is also the language policy rules are written in.
 */
import { Schema } from "effect"
import { EntityRef } from "./References.js"

/** A field path: a field name, or to-one relationship names followed by a field name. */
export const Path = Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))).pipe(
  Schema.minItems(1),
  Schema.maxItems(16)
)
export type Path = typeof Path.Type

export const Scalar = Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Null)
export type Scalar = typeof Scalar.Type

export const ComparisonOp = Schema.Literal("eq", "ne", "lt", "lte", "gt", "gte", "startsWith", "contains")
export type ComparisonOp = typeof ComparisonOp.Type

export const SetOp = Schema.Literal("in", "notIn")
export type SetOp = typeof SetOp.Type

/** Every operator of the filter language: comparisons, sets, `isNull` and the connectives. */
export const FilterOp = Schema.Literal(...ComparisonOp.literals, ...SetOp.literals, "isNull", "and", "or", "not")
export type FilterOp = typeof FilterOp.Type

/** The operators that apply to a field: by its stored type, and `isNull` only when it is nullable. */
export const fieldOperators = (
  column: "text" | "integer" | "real" | "boolean",
  options: { readonly nullable: boolean; readonly enumerated: boolean }
): ReadonlyArray<ComparisonOp | SetOp | "isNull"> => {
  const base: ReadonlyArray<ComparisonOp | SetOp> =
    column === "boolean" || options.enumerated
      ? ["eq", "ne", "in", "notIn"]
      : column === "text"
        ? ["eq", "ne", "lt", "lte", "gt", "gte", "in", "notIn", "startsWith", "contains"]
        : ["eq", "ne", "lt", "lte", "gt", "gte", "in", "notIn"]
  return options.nullable ? [...base, "isNull"] : base
}

/** The operators that apply to a record's `id` (a text key that is never null). */
export const idOperators = fieldOperators("text", { nullable: false, enumerated: false })

export interface Comparison {
  readonly op: ComparisonOp
  readonly path: Path
  readonly value: Scalar
}
export interface SetMembership {
  readonly op: SetOp
  readonly path: Path
  readonly value: ReadonlyArray<Scalar>
}
export interface IsNull {
  readonly op: "isNull"
  readonly path: Path
}
export interface And {
  readonly op: "and"
  readonly filters: ReadonlyArray<Filter>
}
export interface Or {
  readonly op: "or"
  readonly filters: ReadonlyArray<Filter>
}
export interface Not {
  readonly op: "not"
  readonly filter: Filter
}
export type Filter = Comparison | SetMembership | IsNull | And | Or | Not

export const Comparison = Schema.Struct({ op: ComparisonOp, path: Path, value: Scalar })
export const SetMembership = Schema.Struct({ op: SetOp, path: Path, value: Schema.Array(Scalar) })
export const IsNull = Schema.Struct({ op: Schema.Literal("isNull"), path: Path })

export const Filter: Schema.Schema<Filter> = Schema.Union(
  Comparison,
  SetMembership,
  IsNull,
  Schema.Struct({ op: Schema.Literal("and"), filters: Schema.Array(Schema.suspend(() => Filter)) }),
  Schema.Struct({ op: Schema.Literal("or"), filters: Schema.Array(Schema.suspend(() => Filter)) }),
  Schema.Struct({ op: Schema.Literal("not"), filter: Schema.suspend(() => Filter) })
).annotations({ identifier: "Filter" })

export const Direction = Schema.Literal("asc", "desc")
export type Direction = typeof Direction.Type

export const Selection = Schema.Struct({ path: Path })
export const OrderTerm = Schema.Struct({ path: Path, direction: Direction })
export type OrderTerm = typeof OrderTerm.Type

export const QueryPage = Schema.Struct({
  first: Schema.optional(Schema.Int.pipe(Schema.positive())),
  after: Schema.optional(Schema.String)
})

export const QueryDocumentV1 = Schema.Struct({
  version: Schema.Literal(1),
  from: EntityRef,
  where: Schema.optional(Filter),
  select: Schema.Record({ key: Schema.String, value: Selection }),
  order: Schema.optional(Schema.Array(OrderTerm)),
  page: Schema.optional(QueryPage)
}).annotations({ identifier: "QueryDocumentV1" })
export type QueryDocumentV1 = typeof QueryDocumentV1.Type

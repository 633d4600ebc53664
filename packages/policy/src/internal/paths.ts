/**
 * Field paths over the compiled catalog: to-one relationship names followed by a field
 * name (or `id`). Shared by rule compilation and the in-memory evaluator.
 */
import type { Catalog, ColumnType, CompiledRelationship } from "@cairn/catalog/Catalog"
import { idOperators } from "@cairn/domain/QueryDocument"

/** What rule checking needs to know about the field a path ends at. */
export interface FieldType {
  readonly entity: string
  readonly name: string
  readonly column: ColumnType
  readonly nullable: boolean
  readonly literals?: ReadonlyArray<string | number | boolean>
  readonly operators: ReadonlyArray<string>
}


/** The type of `field` of `entity`, including the record id; undefined when unknown. */
export const fieldType = (catalog: Catalog, entity: string, field: string): FieldType | undefined => {
  if (field === "id") return { entity, name: "id", column: "text", nullable: false, operators: idOperators }
  const f = catalog.entity(entity)?.field(field)
  return f
    ? {
        entity,
        name: f.name,
        column: f.column,
        nullable: f.nullable,
        ...(f.literals ? { literals: f.literals } : {}),
        operators: f.operators
      }
    : undefined
}

export interface ResolvedPath {
  readonly hops: ReadonlyArray<CompiledRelationship>
  readonly field: FieldType
}

/** Resolves `path` from `entity`; a string says what is wrong. */
export const resolvePath = (catalog: Catalog, entity: string, path: ReadonlyArray<string>): ResolvedPath | string => {
  if (path.length === 0) return "the path is empty"
  const hops: Array<CompiledRelationship> = []
  let current = entity
  for (const [i, segment] of path.entries()) {
    const last = i === path.length - 1
    if (last) {
      const field = fieldType(catalog, current, segment)
      if (!field) {
        const isRel = catalog.entity(current)?.relationship(segment) !== undefined
        return isRel
          ? `path "${path.join(".")}" ends at relationship "${segment}"; name a field of ${catalog.entity(current)!.relationship(segment)!.target} after it`
          : `path "${path.join(".")}": ${current} has no field "${segment}"`
      }
      return { hops, field }
    }
    const rel = catalog.entity(current)?.relationship(segment)
    if (!rel) return `path "${path.join(".")}": ${current} has no relationship "${segment}"`
    hops.push(rel)
    current = rel.target
  }
  return "the path is empty"
}

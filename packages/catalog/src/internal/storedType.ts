/**
 * Derives a field's stored representation (SQLite column) from its Effect Schema.
 * Only scalar encodings are storable; anything else is a compile error, so a
 * record never needs a representation the log cannot replay.
 */
import { Option, Schema, SchemaAST as AST } from "effect"
import { isFileAst } from "../File.js"

export type ColumnType = "text" | "integer" | "real" | "boolean"

export interface StoredType {
  readonly column: ColumnType
  readonly nullable: boolean
  /** The allowed values, when the field is a union of literals. */
  readonly literals?: ReadonlyArray<string | number | boolean>
  /** The schema without null/undefined: what a value must satisfy. */
  readonly core: AST.AST
  /** A file reference (`File.File`): stored as its JSON text. */
  readonly file?: true
}

const isInt = (ast: AST.AST): boolean => {
  let current: AST.AST = ast
  for (;;) {
    if (Option.getOrUndefined(AST.getSchemaIdAnnotation(current)) === Schema.IntSchemaId) return true
    if (AST.isRefinement(current)) current = current.from
    else return false
  }
}

const literalColumn = (value: AST.LiteralValue): ColumnType | undefined =>
  typeof value === "string" ? "text" : typeof value === "number" ? "real" : typeof value === "boolean" ? "boolean" : undefined

export const analyze = (type: AST.AST, isOptional: boolean): StoredType | string => {
  let nullable = isOptional
  let core = type
  if (AST.isUnion(type)) {
    const rest = type.types.filter((member) => {
      const encoded = AST.encodedAST(member)
      if (AST.isUndefinedKeyword(encoded) || (AST.isLiteral(encoded) && encoded.literal === null)) {
        nullable = true
        return false
      }
      return true
    })
    if (rest.length === 0) return "a field cannot be only null or undefined"
    core = rest.length === 1 ? rest[0]! : AST.Union.make(rest)
  }
  if (isFileAst(core)) return { column: "text", nullable, core, file: true }
  const encoded = AST.encodedAST(core)
  if (AST.isStringKeyword(encoded) || AST.isTemplateLiteral(encoded)) return { column: "text", nullable, core }
  if (AST.isNumberKeyword(encoded)) return { column: isInt(core) ? "integer" : "real", nullable, core }
  if (AST.isBooleanKeyword(encoded)) return { column: "boolean", nullable, core }
  const literals: ReadonlyArray<AST.Literal> | undefined = AST.isLiteral(encoded)
    ? [encoded]
    : AST.isUnion(encoded) && encoded.types.every(AST.isLiteral)
      ? (encoded.types as ReadonlyArray<AST.Literal>)
      : undefined
  if (literals) {
    const values = literals.map((l) => l.literal)
    const columns = new Set(values.map(literalColumn))
    if (columns.size === 1 && !columns.has(undefined)) {
      return { column: [...columns][0]!, nullable, literals: values as Array<string | number | boolean>, core }
    }
  }
  return "its schema must encode to a string, number, boolean or a union of same-typed literals (optionally nullable)"
}

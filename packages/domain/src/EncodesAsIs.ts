/**
 * Whether encoding a value a schema decoded can be skipped (`Mutate`'s operation inputs): Cairn's
 * own reading of a schema's shape through Effect's public AST, not a copy of its parser.
 */
import type { SchemaAST } from "effect"

/** Whether a struct (or anything opaque) is somewhere inside `ast`. */
const mayHoldStruct = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Refinement":
      return mayHoldStruct(ast.from)
    case "Transformation":
      return mayHoldStruct(ast.from) || mayHoldStruct(ast.to)
    case "Union":
      return ast.types.some(mayHoldStruct)
    case "TupleType":
      return ast.elements.some((e) => mayHoldStruct(e.type)) || ast.rest.some((r) => mayHoldStruct(r.type))
    // Structs themselves; declarations and lazy schemas may hold anything.
    case "TypeLiteral":
    case "Declaration":
    case "Suspend":
      return true
    default:
      return false
  }
}

/** Whether `ast` is a struct whose fields hold no struct. */
const isShallowStruct = (ast: SchemaAST.AST): boolean =>
  ast._tag === "TypeLiteral" && ast.indexSignatures.length === 0 && !ast.propertySignatures.some((ps) => mayHoldStruct(ps.type))

/** Whether a transformation (or anything opaque) is somewhere in `ast`. */
const mayTransform = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "Refinement":
      return mayTransform(ast.from)
    case "Union":
      return ast.types.some(mayTransform)
    case "TupleType":
      return ast.elements.some((e) => mayTransform(e.type)) || ast.rest.some((r) => mayTransform(r.type))
    case "TypeLiteral":
      return ast.propertySignatures.some((ps) => mayTransform(ps.type)) || ast.indexSignatures.length > 0
    case "Transformation":
    case "Declaration":
    case "Suspend":
      return true
    default:
      return false
  }
}

/**
 * Whether encoding a value that this schema decoded gives that value back unchanged, so the
 * encode can be skipped: a struct of plain fields (no transformation anywhere, no struct inside,
 * so no union can pick another struct than the decode did and drop keys).
 */
export const encodesAsIs = (ast: SchemaAST.AST): boolean => isShallowStruct(ast) && !mayTransform(ast)

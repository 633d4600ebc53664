/**
 * Parsing with `onExcessProperty: "error"` at a fraction of its cost on the usual input.
 * Effect's parser checks every key of a struct's input against a union of the expected keys
 * (~0.3 µs a key: 2–3 µs of a writer's record, more than the rest of its parse). For a struct
 * whose fields hold no struct (so the option can matter only for its own keys), an input
 * whose own keys are all expected parses exactly as without the option; any other input, or
 * schema, takes the strict parse itself.
 */
import { Predicate, SchemaAST } from "effect"

/** Whether the option can matter below `ast`: a struct (or anything opaque) somewhere inside it. */
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
    // Structs themselves; declarations and lazy schemas may parse anything with the caller's options.
    case "TypeLiteral":
    case "Declaration":
    case "Suspend":
      return true
    default:
      return false
  }
}

/** The keys of a struct whose fields hold no struct, else `undefined` (no shortcut for this schema). */
const shallowKeys = (ast: SchemaAST.AST): ReadonlySet<PropertyKey> | undefined =>
  ast._tag === "TypeLiteral" && ast.indexSignatures.length === 0 && !ast.propertySignatures.some((ps) => mayHoldStruct(ps.type))
    ? new Set(ast.propertySignatures.map((ps) => ps.name))
    : undefined

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
export const encodesAsIs = (ast: SchemaAST.AST): boolean => shallowKeys(ast) !== undefined && !mayTransform(ast)

/**
 * `strict` (a parse of the schema of `ast` with `onExcessProperty: "error"`), answered by
 * `lenient` (the same parse without that option) when that cannot differ: the schema is a
 * struct with no struct inside and the input has no key it does not expect.
 */
export const strictParse = <R>(ast: SchemaAST.AST, strict: (input: unknown) => R, lenient: (input: unknown) => R): ((input: unknown) => R) => {
  const keys = shallowKeys(ast)
  if (keys === undefined) return strict
  return (input) => {
    if (!Predicate.isRecord(input)) return strict(input)
    for (const key of Reflect.ownKeys(input)) if (!keys.has(key)) return strict(input)
    return lenient(input)
  }
}

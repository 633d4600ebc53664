/**
 * Parsing a struct of plain values at a fraction of Effect's cost. Effect's parser allocates an
 * Either per field and per refinement, and walks its generic machinery for every value: most of
 * a writer's parse of a record. For a struct whose fields are plain values (strings, numbers,
 * booleans, literals, `undefined`, unions and refinements of these; no transformation, no struct
 * inside, no index signature), a successful parse gives a new object with the schema's keys the
 * input has, in the schema's order, holding the input's values. That is built here directly,
 * running the refinements' own filters; any other input (a value a check refuses, a missing
 * required key, a filter that throws) takes the parse itself, which answers and fails as always.
 */
import { Either, Option, SchemaAST } from "effect"

type Check = (u: unknown) => boolean

/** A check that accepts exactly what parsing `ast` accepts (giving the value back), or `undefined` for anything else. */
const checkOf = (ast: SchemaAST.AST): Check | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return (u) => typeof u === "string"
    case "NumberKeyword":
      return (u) => typeof u === "number"
    case "BooleanKeyword":
      return (u) => typeof u === "boolean"
    case "UndefinedKeyword":
      return (u) => u === undefined
    case "Literal": {
      const literal = ast.literal
      return (u) => u === literal
    }
    case "Union": {
      const checks = ast.types.map(checkOf)
      if (checks.some((c) => c === undefined)) return undefined
      const all = checks as ReadonlyArray<Check>
      return (u) => all.some((c) => c(u))
    }
    case "Refinement": {
      const from = checkOf(ast.from)
      if (from === undefined) return undefined
      // As the parser calls it once `from` accepted the value (it passes these options when given none).
      return (u) => from(u) && Option.isNone(ast.filter(u, SchemaAST.defaultParseOption, ast))
    }
    default:
      return undefined
  }
}

interface Field {
  readonly name: string
  readonly optional: boolean
  readonly check: Check
}

/**
 * `parse` (a parse of the schema of `ast` without `onExcessProperty: "error"`, decoding or encoding:
 * with no transformation inside, both give the same), answered directly when the schema is a
 * struct of plain values and the input passes every field's check.
 */
export const plainParse = <A, E>(ast: SchemaAST.AST, parse: (input: unknown) => Either.Either<A, E>): ((input: unknown) => Either.Either<A, E>) => {
  // An empty struct parses as "anything not nullable", giving the input back as is: not a plain struct.
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return parse
  const fields: Array<Field> = []
  for (const ps of ast.propertySignatures) {
    const check = checkOf(ps.type)
    if (typeof ps.name !== "string" || check === undefined) return parse
    fields.push({ name: ps.name, optional: ps.isOptional, check })
  }
  /** The parse's output for `record` when every field passes its check, else `undefined`. */
  const direct = (record: Readonly<Record<string, unknown>>): Record<string, unknown> | undefined => {
    const output: Record<string, unknown> = {}
    for (const field of fields) {
      if (!Object.prototype.hasOwnProperty.call(record, field.name)) {
        if (field.optional) continue
        return undefined
      }
      const value = record[field.name]
      if (!field.check(value)) return undefined
      output[field.name] = value
    }
    return output
  }
  return (input) => {
    if (typeof input !== "object" || input === null || Array.isArray(input)) return parse(input)
    let output: Record<string, unknown> | undefined
    try {
      output = direct(input as Readonly<Record<string, unknown>>)
    } catch {
      output = undefined
    }
    return output === undefined ? parse(input) : Either.right(output as A)
  }
}

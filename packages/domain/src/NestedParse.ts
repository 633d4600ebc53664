/**
 * Strict parsing of nested request schemas at a fraction of Effect's cost. Effect's parser
 * allocates an Either per value and per refinement, a Composite per struct, and checks every
 * key of a struct's input against a union of the expected keys: ~12 µs for a usual query
 * request, most of what decoding one cost (and a query's filter is parsed twice: node by node
 * by the filter check, then whole by the request's schema). For a schema made of structs,
 * records, arrays, tuples, unions, literals, plain values, refinements, lazy (suspended)
 * schemas and transformations whose decode answers synchronously, a compiled parser here
 * replays Effect's decoding step by step (the same checks in the same order, the schema's own
 * filters and transformations called with the same arguments, the same fresh objects and
 * arrays with the same keys in the same order, unions resolved through Effect's own search
 * tree) and answers the value Effect would. It answers only successes: for an input it
 * refuses, or anything it is not sure of, the parse it stands in for runs and answers (and
 * fails) exactly as always. A schema holding anything else is not compiled at all.
 */
import { Either, Option, ParseResult, SchemaAST } from "effect"

/** What a compiled parser answers for an input that Effect's parse would refuse. */
const refused: unique symbol = Symbol("NestedParse/refused")

/**
 * Thrown (and caught by `nestedParse`) where the answer might differ from Effect's, e.g. an
 * effectful transformation: the input then takes the parse itself.
 */
class Unsure {}
const unsure = new Unsure()

/** A compiled parser: the parsed value, `refused`, or a throw (`unsure`, or whatever a filter threw). */
type Parser = (input: unknown) => unknown

/** Thrown while compiling a schema that holds a node this module does not replay. */
class Unsupported extends Error {}

/** The options a strict parse runs with; refinements and transformations are handed these, as Effect hands them. */
export interface StrictOptions {
  readonly onExcessProperty: "error"
  readonly errors?: "first" | "all"
}

const hasOwn = (o: object, key: PropertyKey) => Object.prototype.hasOwnProperty.call(o, key)
const isRecordOrArray = (u: unknown): u is Record<PropertyKey, unknown> => typeof u === "object" && u !== null

interface SearchTree {
  readonly keys: { readonly [key: PropertyKey]: { readonly buckets: { readonly [literal: string]: ReadonlyArray<SchemaAST.AST> } } }
  readonly otherwise: ReadonlyArray<SchemaAST.AST>
}
/**
 * Effect's own choice of the union members worth trying for an input (by the literal fields
 * they require), so a union here tries the same members in the same order as Effect's does.
 * Not part of Effect's typed surface: where it is missing, unions are not compiled.
 */
const getSearchTree = (ParseResult as unknown as { getSearchTree?: (members: ReadonlyArray<SchemaAST.AST>, isDecoding: boolean) => SearchTree }).getSearchTree

/** The keys a record's index signature reads, as Effect reads them (`getKeysForIndexSignature`). */
const keysOf = (parameter: SchemaAST.AST): ((input: object) => ReadonlyArray<PropertyKey>) => {
  switch (parameter._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return Object.keys
    case "SymbolKeyword":
      return Object.getOwnPropertySymbols
    case "Refinement":
      return keysOf(parameter.from)
    default:
      throw new Unsupported(parameter._tag)
  }
}

const predicate = (test: (u: unknown) => boolean): Parser => (u) => (test(u) ? u : refused)

class Compiler {
  private readonly parsers = new Map<SchemaAST.AST, Parser>()
  constructor(private readonly options: StrictOptions) {}

  /** The parser of `ast`, compiled once (a schema's nodes are shared, and a lazy one may refer to itself). */
  parserOf(ast: SchemaAST.AST): Parser {
    let parser = this.parsers.get(ast)
    if (parser === undefined) {
      // Options or a fallback of a node's own change how Effect parses below it: not replayed.
      if (Option.isSome(SchemaAST.getParseOptionsAnnotation(ast)) || Option.isSome(SchemaAST.getDecodingFallbackAnnotation(ast))) {
        throw new Unsupported("annotation")
      }
      parser = this.compile(ast)
      this.parsers.set(ast, parser)
    }
    return parser
  }

  private compile(ast: SchemaAST.AST): Parser {
    switch (ast._tag) {
      case "StringKeyword":
        return predicate((u) => typeof u === "string")
      case "NumberKeyword":
        return predicate((u) => typeof u === "number")
      case "BooleanKeyword":
        return predicate((u) => typeof u === "boolean")
      case "BigIntKeyword":
        return predicate((u) => typeof u === "bigint")
      case "SymbolKeyword":
        return predicate((u) => typeof u === "symbol")
      case "UndefinedKeyword":
        return predicate((u) => u === undefined)
      case "NeverKeyword":
        return () => refused
      case "ObjectKeyword":
        return predicate((u) => (typeof u === "object" && u !== null) || typeof u === "function")
      case "UnknownKeyword":
      case "AnyKeyword":
      case "VoidKeyword":
        return (u) => u
      case "Literal": {
        const literal = ast.literal
        return predicate((u) => u === literal)
      }
      case "UniqueSymbol": {
        const symbol = ast.symbol
        return predicate((u) => u === symbol)
      }
      case "Enums": {
        const values = ast.enums.map(([, value]) => value)
        return predicate((u) => values.some((value) => value === u))
      }
      case "Refinement":
        return this.refinement(ast)
      case "Transformation":
        return this.transformation(ast)
      case "TupleType":
        return this.tuple(ast)
      case "TypeLiteral":
        return this.struct(ast)
      case "Union":
        return this.union(ast)
      case "Suspend": {
        // Compiled on first use, as Effect does: the schema it names may not exist yet.
        let inner: Parser | undefined
        return (u) => {
          if (inner === undefined) {
            try {
              inner = this.parserOf(ast.f())
            } catch {
              inner = () => {
                throw unsure
              }
            }
          }
          return inner(u)
        }
      }
      default:
        // Declarations (classes, dates, ...) and template literals parse with code of their own.
        throw new Unsupported(ast._tag)
    }
  }

  /** Effect's order: the value through `from`, then the schema's own filter on what `from` gave. */
  private refinement(ast: SchemaAST.Refinement): Parser {
    const from = this.parserOf(ast.from)
    const options = this.options
    return (u) => {
      const a = from(u)
      return a !== refused && Option.isNone(ast.filter(a, options, ast)) ? a : refused
    }
  }

  /**
   * The transformation's own decode, called as Effect calls it; only an answer already at hand
   * (an Either) is taken, anything effectful is left to Effect. Composition is the identity.
   */
  private transformation(ast: SchemaAST.Transformation): Parser {
    const kind = ast.transformation
    if (kind._tag !== "FinalTransformation" && kind._tag !== "ComposeTransformation") throw new Unsupported(kind._tag)
    const from = this.parserOf(ast.from)
    const to = this.parserOf(ast.to)
    const options = this.options
    if (kind._tag === "ComposeTransformation") {
      return (u) => {
        const a = from(u)
        return a === refused ? refused : to(a)
      }
    }
    return (u) => {
      const a = from(u)
      if (a === refused) return refused
      const b: unknown = kind.decode(a, options, ast, u)
      if (!Either.isEither(b)) throw unsure
      return Either.isLeft(b) ? refused : to(b.right)
    }
  }

  /** Arrays and tuples: a fresh array of the parsed elements, as Effect builds it. */
  private tuple(ast: SchemaAST.TupleType): Parser {
    // Elements after a rest element are rare enough not to replay.
    if (ast.rest.length > 1) throw new Unsupported("post-rest elements")
    const elements = ast.elements.map((e) => this.parserOf(e.type))
    const optional = ast.elements.map((e) => e.isOptional)
    const rest = ast.rest.length === 1 ? this.parserOf(ast.rest[0]!.type) : undefined
    const required = optional.filter((o) => !o).length
    return (u) => {
      if (!Array.isArray(u)) return refused
      const len = u.length
      if (len < required || (rest === undefined && len > elements.length)) return refused
      const output: Array<unknown> = []
      for (let i = 0; i < elements.length; i++) {
        // A missing element here is an optional one (a missing required one was refused above).
        if (len < i + 1) continue
        const v = elements[i]!(u[i])
        if (v === refused) return refused
        output.push(v)
      }
      if (rest !== undefined) {
        for (let i = elements.length; i < len; i++) {
          const v = rest(u[i])
          if (v === refused) return refused
          output.push(v)
        }
      }
      return output
    }
  }

  /**
   * Structs and records, in Effect's order: every own key must be expected (a field's name or
   * a key an index signature accepts), then each field by the schema's order into a fresh
   * object, then each index signature's keys.
   */
  private struct(ast: SchemaAST.TypeLiteral): Parser {
    const { propertySignatures, indexSignatures } = ast
    // An empty struct parses as "anything not nullable", giving the input back.
    if (propertySignatures.length === 0 && indexSignatures.length === 0) return predicate((u) => u !== null && u !== undefined)
    const names = new Set<PropertyKey>()
    const fields = propertySignatures.map((ps) => {
      // Assigning "__proto__" to a fresh object sets its prototype: not replayed.
      if (typeof ps.name !== "string" || ps.name === "__proto__") throw new Unsupported("field name")
      names.add(ps.name)
      return { name: ps.name, optional: ps.isOptional, parse: this.parserOf(ps.type) }
    })
    const indexes = indexSignatures.map((is) => ({ key: this.parserOf(is.parameter), keys: keysOf(is.parameter), value: this.parserOf(is.type) }))
    const expected = (key: PropertyKey) => names.has(key) || indexes.some((is) => is.key(key) !== refused)
    /** The fields into a fresh object, in the schema's order, or `refused`. */
    const fieldsOf = (input: Record<PropertyKey, unknown>): Record<PropertyKey, unknown> | typeof refused => {
      const output: Record<PropertyKey, unknown> = {}
      for (let i = 0; i < fields.length; i++) {
        const field = fields[i]!
        // A missing optional field is left out; a missing required one is parsed as what reading it gives.
        if (field.optional && !hasOwn(input, field.name)) continue
        const v = field.parse(input[field.name])
        if (v === refused) return refused
        output[field.name] = v
      }
      return output
    }
    if (indexes.length === 0) {
      // A struct (the usual case): every own key must be a field's name.
      return (u) => {
        if (typeof u !== "object" || u === null || Array.isArray(u)) return refused
        const input = u as Record<PropertyKey, unknown>
        // Own names, then own symbols: `Reflect.ownKeys`, at half its cost. More names than
        // fields means one at least is unexpected.
        const own = Object.getOwnPropertyNames(input)
        if (own.length > fields.length) return refused
        for (let i = 0; i < own.length; i++) if (!names.has(own[i]!)) return refused
        if (Object.getOwnPropertySymbols(input).length > 0) return refused
        return fieldsOf(input)
      }
    }
    return (u) => {
      if (typeof u !== "object" || u === null || Array.isArray(u)) return refused
      const input = u as Record<PropertyKey, unknown>
      for (const key of Object.getOwnPropertyNames(input)) if (!expected(key)) return refused
      for (const key of Object.getOwnPropertySymbols(input)) if (!expected(key)) return refused
      const output = fieldsOf(input)
      if (output === refused) return refused
      for (const is of indexes) {
        for (const key of is.keys(input)) {
          if (is.key(key) === refused) continue
          // Assigning "__proto__" sets the output's prototype in Effect's parse too: left to it.
          if (key === "__proto__") throw unsure
          const v = is.value(input[key])
          if (v === refused) return refused
          if (!names.has(key)) output[key] = v
        }
      }
      return output
    }
  }

  /**
   * Effect's union: the members its search tree names for the input's literal fields, then
   * those without any, tried in that order; the first that parses answers.
   */
  private union(ast: SchemaAST.Union): Parser {
    const members = new Map(ast.types.map((t) => [t, this.parserOf(t)] as const))
    // A union of literals (most of them): a membership test answers exactly as trying each in turn.
    if (ast.types.every((t) => t._tag === "Literal" && !(typeof t.literal === "number" && Number.isNaN(t.literal)))) {
      const literals = new Set(ast.types.map((t) => (t as SchemaAST.Literal).literal))
      return predicate((u) => literals.has(u as SchemaAST.LiteralValue))
    }
    if (getSearchTree === undefined) throw new Unsupported("union")
    // Built on first use: it reads what lazy members name, which may not exist yet.
    let tree: { readonly keys: ReadonlyArray<PropertyKey>; readonly search: SearchTree } | undefined
    const attempt = (candidates: ReadonlyArray<SchemaAST.AST>, u: unknown) => {
      for (const candidate of candidates) {
        const v = members.get(candidate)!(u)
        if (v !== refused) return v
      }
      return refused
    }
    return (u) => {
      if (tree === undefined) {
        const search = getSearchTree(ast.types, true)
        tree = { keys: Reflect.ownKeys(search.keys), search }
      }
      const { keys, search } = tree
      if (keys.length > 0 && isRecordOrArray(u)) {
        // Every candidate is gathered before any is tried: reading a literal field with `String`
        // may throw (an object's own toString), and then Effect's parse throws before trying any.
        let candidates: ReadonlyArray<SchemaAST.AST> | undefined
        for (const name of keys) {
          if (!hasOwn(u, name)) continue
          const buckets = search.keys[name]!.buckets
          const literal = String(u[name])
          if (hasOwn(buckets, literal)) candidates = candidates === undefined ? buckets[literal]! : candidates.concat(buckets[literal]!)
        }
        if (candidates !== undefined) {
          const v = attempt(candidates, u)
          if (v !== refused) return v
        }
      }
      return attempt(search.otherwise, u)
    }
  }
}

/**
 * `parse` (a decode of the schema of `ast` with `options`), answered directly when the schema
 * compiles here (see the module comment) and its compiled parser accepts the input; any other
 * input, or schema, takes `parse` itself.
 */
export const nestedParse = <A, E>(
  ast: SchemaAST.AST,
  options: StrictOptions,
  parse: (input: unknown) => Either.Either<A, E>
): ((input: unknown) => Either.Either<A, E>) => {
  let parser: Parser
  try {
    parser = new Compiler(options).parserOf(ast)
  } catch (e) {
    if (e instanceof Unsupported) return parse
    throw e
  }
  return (input) => {
    let output: unknown
    try {
      output = parser(input)
    } catch {
      output = refused
    }
    return output === refused ? parse(input) : Either.right(output as A)
  }
}

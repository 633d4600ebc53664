/**
 * Typed client bindings generated from a compiled catalog: one TypeScript module per
 * application, its types taken from the wire side of each schema. Used by `cairn bindings`
 * and `npm run bindings` (which writes the tracker's checked-in `@cairn/client/generated/tracker`).
 */
import { type Catalog, type CompiledField } from "@cairn/catalog/Catalog"
import { type Schema, SchemaAST as AST } from "effect"

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/
const key = (name: string) => (identifier.test(name) ? name : JSON.stringify(name))

/** Members of the entity binding that operations must not shadow. */
const reserved = new Set(["query"])

/**
 * The TypeScript type of a schema's encoded (wire) side: what the client sends and
 * receives as JSON. Refinements and transformations fall away in `encodedAST`.
 */
const typeOf = (ast: AST.AST, indent: string, seen: ReadonlySet<AST.AST> = new Set()): string => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "string"
    case "NumberKeyword":
      return "number"
    case "BooleanKeyword":
      return "boolean"
    case "BigIntKeyword":
      return "bigint"
    case "UndefinedKeyword":
      return "undefined"
    case "VoidKeyword":
      return "void"
    case "NeverKeyword":
      return "never"
    case "ObjectKeyword":
      return "object"
    case "Literal":
      return ast.literal === null ? "null" : typeof ast.literal === "bigint" ? `${ast.literal}n` : JSON.stringify(ast.literal)
    case "Enums":
      return ast.enums.map(([, value]) => JSON.stringify(value)).join(" | ") || "never"
    case "Union":
      return [...new Set(ast.types.map((t) => typeOf(t, indent, seen)))].join(" | ")
    case "TupleType": {
      const elements = ast.elements.map((e) => typeOf(e.type, indent, seen) + (e.isOptional ? "?" : ""))
      const [rest, ...after] = ast.rest.map((r) => typeOf(r.type, indent, seen))
      if (elements.length === 0 && rest !== undefined && after.length === 0) return `ReadonlyArray<${rest}>`
      return `readonly [${[...elements, ...(rest !== undefined ? [`...Array<${rest}>`] : []), ...after].join(", ")}]`
    }
    case "TypeLiteral": {
      if (ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) return "Record<string, never>"
      const inner = indent + "  "
      const members = [
        ...ast.propertySignatures.map(
          (p) => `${inner}readonly ${key(String(p.name))}${p.isOptional ? "?" : ""}: ${typeOf(p.type, inner, seen)}`
        ),
        ...ast.indexSignatures.map((s) => `${inner}readonly [key: string]: ${typeOf(s.type, inner, seen)}`)
      ]
      return `{\n${members.join("\n")}\n${indent}}`
    }
    case "Refinement":
    case "Transformation":
      return typeOf(AST.encodedAST(ast), indent, seen)
    case "Suspend": {
      // Recursive schemas are rare in operation contracts; the runtime still validates them.
      if (seen.has(ast)) return "unknown"
      return typeOf(ast.f(), indent, new Set([...seen, ast]))
    }
    default:
      return "unknown"
  }
}

const wireType = (schema: Schema.Schema<any, any>, indent: string) => typeOf(AST.encodedAST(schema.ast), indent)

const fieldType = (field: CompiledField, indent: string) => wireType(field.schema, indent) + (field.nullable ? " | null" : "")

const doc = (text: string, indent: string) => `${indent}/** ${text.replace(/\*\//g, "*\\/").replace(/\s+/g, " ").trim()} */\n`

const pascal = (name: string) => name.replace(/(^|[-_])([a-z0-9])/g, (_, __, c: string) => c.toUpperCase())
const camel = (name: string) => name.replace(/[-_]([a-z0-9])/g, (_, c: string) => c.toUpperCase())

export interface GenerateOptions {
  /**
   * Where the generated module imports `makeBindings` from: `../Bindings.js` (the default) for
   * a file in `packages/client/src/generated`, `@cairn/client/Bindings` anywhere else.
   */
  readonly bindingsModule?: string
}

/** The bindings module of a compiled catalog, as source text. */
export const generate = (catalog: Catalog, options: GenerateOptions = {}): string => {
  const schemaName = `${pascal(catalog.name)}Schema`
  const entities = catalog.entities.map((entity) => {
    const operations = catalog.operations.filter((o) => o.owner === entity.name)
    for (const op of operations) {
      if (reserved.has(op.name)) throw new Error(`operation ${entity.name}.${op.name} would shadow the binding's ${op.name}(); rename it`)
    }
    const fields = entity.fields.map((f) => `      readonly ${key(f.name)}: ${fieldType(f, "      ")}`)
    const relationships = entity.relationships.map((r) => `${key(r.name)}: ${JSON.stringify(r.target)}`)
    const ops = operations.map(
      (op) =>
        doc(op.description, "      ") +
        `      readonly ${key(op.name)}: {\n` +
        `        readonly targeted: ${op.targeted}\n` +
        `        readonly input: ${wireType(op.input, "        ")}\n` +
        `        readonly output: ${wireType(op.output, "        ")}\n` +
        `      }`
    )
    return (
      doc(entity.description, "  ") +
      `  readonly ${key(entity.name)}: {\n` +
      `    readonly fields: {\n${fields.join("\n")}\n    }\n` +
      `    readonly relationships: {${relationships.length > 0 ? ` readonly ${relationships.join("; readonly ")} ` : ""}}\n` +
      `    readonly operations: {${ops.length > 0 ? `\n${ops.join("\n")}\n    ` : ""}}\n` +
      `  }`
    )
  })
  const meta = catalog.entities.map((entity) => {
    const ops = catalog.operations
      .filter((o) => o.owner === entity.name)
      .map((o) => `${key(o.name)}: { targeted: ${o.targeted} }`)
    return `  ${key(entity.name)}: {${ops.length > 0 ? ` ${ops.join(", ")} ` : ""}}`
  })
  return [
    `// Generated by \`npm run bindings\` (scripts/bindings.ts) from the compiled \`${catalog.name}\` catalog. Do not edit:`,
    `// change the catalog and regenerate. A test fails when this file no longer matches the catalog.`,
    `import { makeBindings } from ${JSON.stringify(options.bindingsModule ?? "../Bindings.js")}`,
    ``,
    `export type ${schemaName} = {`,
    entities.join("\n"),
    `}`,
    ``,
    `/** Typed calls over \`CairnClient\`, e.g. \`${camel(catalog.name)}.Task.complete({ target })\`. */`,
    `export const ${camel(catalog.name)} = makeBindings<${schemaName}>({`,
    meta.join(",\n"),
    `})`,
    ``
  ].join("\n")
}

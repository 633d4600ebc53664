/**
 * The three MCP tools, always exactly these whatever the catalog: entities and
 * operations are arguments discovered with `describe`, never extra tools. Input schemas
 * are generated from the domain's request schemas, so MCP and RPC accept the same shapes.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { DescribeRequest } from "@cairn/domain/Describe"
import { MutateRequest } from "@cairn/domain/Mutate"
import { QueryRequest } from "@cairn/domain/Query"
import { JSONSchema, type Schema } from "effect"

export type ToolName = "describe" | "query" | "mutate"
export const toolNames: ReadonlyArray<ToolName> = ["describe", "query", "mutate"]

export const isToolName = (name: string): name is ToolName => (toolNames as ReadonlyArray<string>).includes(name)

type Json = { [key: string]: unknown }

/** Constraint echoes Effect adds to refinements ("a string at most 64 character(s) long"). */
const generatedDescription = /^(a|an) (string|array|integer|positive|number|non-negative)\b/

/**
 * Size constraints and closed-object markers the engine enforces anyway (with an error
 * naming the place): left out of the published schema, so the tool list stays small
 * whatever the catalog. The engine's strict decoding is the contract; this is the map.
 */
const enforcedByEngine = new Set(["minLength", "maxLength", "minItems", "maxItems", "exclusiveMinimum"])

/** `anyOf` of bare types (`{type: "string"}`, ...) as one `type` list. */
const mergeBareTypes = (node: Json): Json => {
  const anyOf = node["anyOf"]
  if (!Array.isArray(anyOf)) return node
  const types = anyOf.map((a) => (a !== null && typeof a === "object" && Object.keys(a).length === 1 ? (a as Json)["type"] : undefined))
  if (types.some((t) => typeof t !== "string")) return node
  const { anyOf: _, ...rest } = node
  return { ...rest, type: types }
}

/**
 * Drops generated titles and descriptions (they repeat the constraints beside them and
 * would only cost an agent tokens) and the constraints the engine enforces, and inlines
 * every non-recursive definition.
 */
const compact = (node: unknown, defs: Json, recursive: ReadonlySet<string>): unknown => {
  if (Array.isArray(node)) return node.map((n) => compact(n, defs, recursive))
  if (node === null || typeof node !== "object") return node
  const obj = node as Json
  const ref = typeof obj["$ref"] === "string" ? (obj["$ref"] as string) : undefined
  if (ref?.startsWith("#/$defs/")) {
    const name = ref.slice("#/$defs/".length)
    if (!recursive.has(name)) {
      const { $ref: _, ...rest } = obj
      return compact({ ...(defs[name] as Json), ...rest }, defs, recursive)
    }
  }
  const out: Json = {}
  for (const [key, value] of Object.entries(obj)) {
    if (key === "title" || key === "$schema" || key === "$id" || enforcedByEngine.has(key)) continue
    // A closed object is refused by the engine anyway; a map's value schema is kept.
    if (key === "additionalProperties" && value === false) continue
    if (key === "description" && typeof value === "string" && generatedDescription.test(value)) continue
    if (key === "required" && Array.isArray(value) && value.length === 0) continue
    if (key === "properties" && value !== null && typeof value === "object" && Object.keys(value).length === 0) continue
    // `properties` maps names to schemas: recurse into values, never treat names as keywords.
    if (key === "properties" && value !== null && typeof value === "object") {
      out[key] = Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, compact(v, defs, recursive)]))
      continue
    }
    out[key] = compact(value, defs, recursive)
  }
  return mergeBareTypes(out)
}

const refersTo = (node: unknown, name: string): boolean =>
  JSON.stringify(node).includes(`"#/$defs/${name}"`)

/** An MCP `inputSchema` (a top-level object schema) from a domain request schema. */
export const inputSchemaOf = (
  schema: Schema.Schema<any, any, never>,
  propertyDescriptions: Readonly<Record<string, string>>
): Tool["inputSchema"] => {
  const generated = JSONSchema.make(schema, { target: "jsonSchema2020-12" }) as unknown as Json
  const defs = (generated["$defs"] ?? {}) as Json
  const root = typeof generated["$ref"] === "string" ? (defs[(generated["$ref"] as string).slice("#/$defs/".length)] as Json) : generated
  const recursive = new Set(Object.keys(defs).filter((name) => refersTo(defs[name], name)))
  const body = compact(root, defs, recursive) as Json
  const properties = { ...(body["properties"] as Json) }
  for (const [name, description] of Object.entries(propertyDescriptions)) {
    if (properties[name] !== undefined) properties[name] = { ...(properties[name] as Json), description }
  }
  const keptDefs = Object.fromEntries([...recursive].map((name) => [name, compact(defs[name], defs, recursive)]))
  return {
    ...body,
    type: "object",
    properties,
    ...(recursive.size > 0 ? { $defs: keptDefs } : {})
  } as Tool["inputSchema"]
}

/** Every error carries its own recovery, so the descriptions do not repeat the codes. */
const errorsLine = "Errors: isError with {code, message, recovery}; follow recovery."
const ifCatalog = "catalogToken from describe; if stale: catalog_changed, nothing runs."

const describeTool: Tool = {
  name: "describe",
  title: "Describe the catalog",
  description: [
    "Start here: discover what you may read and change.",
    "Give exactly one of: browse {kinds} to list cards; search \"words\"; inspect [exact refs from cards] for field, relationship, input and output schemas.",
    "Entities are records you query; operations are the only way to change data.",
    "Pass the result's catalogToken as ifCatalog to query and mutate. A cursor means more cards: repeat with page.after = cursor.",
    errorsLine
  ].join(" "),
  inputSchema: inputSchemaOf(DescribeRequest, {
    inspect: "Refs from earlier results: {kind:\"entity\"|\"trait\",name} or {kind:\"operation\",owner:{kind:\"entity\",name},name}.",
    page: "limit: cards per page; after: the previous cursor."
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false }
}

const queryTool: Tool = {
  name: "query",
  title: "Query records",
  description: [
    "Read records with one QueryDocumentV1; inspect the entity with describe first.",
    "A path is a field, or to-one relationship names then a field (e.g. [\"project\",\"name\"]); \"id\" is every record's id.",
    "where is a filter tree (see the schema): comparisons on a path, in/notIn lists, isNull, and/or/not.",
    "Answers rows (keyed by your select names), basis, and a cursor when more rows exist: resend with page.after = cursor.",
    errorsLine
  ].join(" "),
  inputSchema: inputSchemaOf(QueryRequest, {
    ifCatalog,
    atLeast: "Position from a receipt: read at or after it."
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false }
}

const mutateTool: Tool = {
  name: "mutate",
  title: "Invoke an operation",
  description: [
    "Change data by invoking exactly one operation; answers its durable receipt.",
    "Inspect the operation with describe first: its input schema, and whether it is targeted (then target {kind: \"entity\", entity, id} is required).",
    "invocationId: a new UUIDv7 per intent; after a timeout or network error resend the SAME request with the SAME id to get the stored receipt, never a second effect.",
    "A file input (Upload) takes an upload handle, or a small file inline as {name, contentType, base64} (48 KiB by default).",
    errorsLine
  ].join(" "),
  inputSchema: inputSchemaOf(MutateRequest, {
    ifCatalog,
    input: "An object matching the operation's input schema."
  }),
  annotations: {
    readOnlyHint: false,
    destructiveHint: true,
    idempotentHint: true,
    openWorldHint: false
  }
}

/** The tool list, identical for every catalog and caller. */
export const tools: ReadonlyArray<Tool> = [describeTool, queryTool, mutateTool]

/** Server instructions sent at initialize: the workflow in a few lines. */
export const instructions = [
  "Cairn exposes one application's data through three tools.",
  "1. describe (browse, search or inspect) to learn entities and operations; keep its catalogToken.",
  "2. query to read records with a QueryDocumentV1, or mutate to invoke one operation with a fresh UUIDv7 invocationId;",
  "pass the catalogToken as ifCatalog.",
  "3. On catalog_changed call describe again and rebuild the request; follow each error's recovery hint."
].join("\n")

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
 * Drops generated titles and descriptions (they repeat the constraints beside them and
 * would only cost an agent tokens) and inlines every non-recursive definition.
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
    if (key === "title" || key === "$schema" || key === "$id") continue
    if (key === "description" && typeof value === "string" && generatedDescription.test(value)) continue
    if (key === "required" && Array.isArray(value) && value.length === 0) continue
    // `properties` maps names to schemas: recurse into values, never treat names as keywords.
    if (key === "properties" && value !== null && typeof value === "object") {
      out[key] = Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, compact(v, defs, recursive)]))
      continue
    }
    out[key] = compact(value, defs, recursive)
  }
  return out
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

const errorsLine = (codes: string) => `On failure the result has isError and {code, message, recovery}; ${codes}.`

const describeTool: Tool = {
  name: "describe",
  title: "Describe the catalog",
  description: [
    "Discover what you may read and change. Start here.",
    "Give exactly one of: browse {kinds: [\"entity\"|\"trait\"|\"operation\"]} to list cards;",
    "search \"words\" to find definitions by name or description;",
    "inspect [references] (exact refs from earlier cards) to get field, relationship, input and output schemas.",
    "Entities are records you query; operations are the only way to change data.",
    "Every result has catalogToken: pass it as ifCatalog to query and mutate.",
    "A cursor means more cards: repeat the request with page.after = cursor.",
    errorsLine("invalid_query: fix the request; unknown_definition: browse or search again")
  ].join(" "),
  inputSchema: inputSchemaOf(DescribeRequest, {
    browse: "List cards of these definition kinds.",
    search: "Words matched against names and descriptions.",
    inspect: "Exact references from earlier results: {kind:\"entity\",name}, {kind:\"trait\",name} or {kind:\"operation\",owner:{kind:\"entity\",name},name}.",
    page: "limit: cards per page; after: the cursor of the previous page."
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false }
}

const queryTool: Tool = {
  name: "query",
  title: "Query records",
  description: [
    "Read records with one QueryDocumentV1. Inspect the entity with describe first.",
    "query: {version: 1, from: {kind: \"entity\", name}, select: {column: {path: [field]}}, where?, order?: [{path, direction: \"asc\"|\"desc\"}], page?: {first, after}}.",
    "A path is a field name, or to-one relationship names then a field, e.g. [\"project\", \"name\"]; \"id\" is every record's id.",
    "where: {op, path, value} with op eq|ne|lt|lte|gt|gte|startsWith|contains; {op: in|notIn, path, value: [..]}; {op: isNull, path}; {op: and|or, filters: [..]}; {op: not, filter}.",
    "Answers rows (keys = your select names), basis, and a cursor when more rows exist: send the same query with page.after = cursor.",
    errorsLine(
      "invalid_query: fix the document, never resend it unchanged; inaccessible: stop or ask the user for access; catalog_changed: call describe and rebuild; query_budget_exceeded: narrow select, paths, filters or page.first; unknown_definition: describe again"
    )
  ].join(" "),
  inputSchema: inputSchemaOf(QueryRequest, {
    ifCatalog: "catalogToken from describe; a stale token fails with catalog_changed instead of running.",
    query: "The QueryDocumentV1."
  }),
  annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false }
}

const mutateTool: Tool = {
  name: "mutate",
  title: "Invoke an operation",
  description: [
    "Change data by invoking exactly one operation; answers its durable receipt.",
    "Inspect the operation with describe first: its input schema and whether it is targeted.",
    "target {kind: \"entity\", entity, id} is required for targeted operations and omitted otherwise.",
    "invocationId: a new UUIDv7 for each new intent. After a timeout or network error, resend the SAME request with the SAME invocationId:",
    "you get the stored receipt, never a second effect.",
    errorsLine(
      "invalid_input: fix input from the published schema; operation_rejected: show the reason to the user, do not retry blindly; invocation_conflict: that invocationId was used for another intent, use a new one only for a new intent; inaccessible: stop or ask for access; catalog_changed: call describe and rebuild; unknown_definition: describe again"
    )
  ].join(" "),
  inputSchema: inputSchemaOf(MutateRequest, {
    ifCatalog: "catalogToken from describe; a stale token fails with catalog_changed instead of running.",
    operation: "{kind: \"operation\", owner: {kind: \"entity\", name}, name} from describe.",
    target: "The record a targeted operation acts on.",
    input: "An object matching the operation's input schema.",
    invocationId: "UUIDv7 naming this one intent."
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

/**
 * File fields: a record holds a reference to a stored object (object id, sha256, size,
 * content type, name), never its bytes. Operation inputs name an upload by its short-lived
 * handle (`Upload`); the engine swaps the handle for the reference before the handler runs.
 */
import { Option, Schema, SchemaAST as AST } from "effect"

/** Marks a schema as a file reference: the catalog stores it as one JSON text column. */
export const FileAnnotationId: unique symbol = Symbol.for("@cairn/catalog/File")
/** Marks an operation input field as an upload handle, resolved to a `FileRef` at `mutate`. */
export const UploadAnnotationId: unique symbol = Symbol.for("@cairn/catalog/File/Upload")

export const Sha256 = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/))

/** The reference a record stores. */
export const FileRef = Schema.Struct({
  objectId: Schema.String.pipe(Schema.pattern(/^[0-9a-f-]{36}$/)),
  sha256: Sha256,
  size: Schema.Int.pipe(Schema.nonNegative()),
  contentType: Schema.String.pipe(Schema.maxLength(255)),
  name: Schema.String.pipe(Schema.maxLength(255))
})
export type FileRef = typeof FileRef.Type

/** A file field of an entity. Queries answer it with its metadata and a `url` to download it. */
export const File = FileRef.annotations({
  [FileAnnotationId]: true,
  title: "File",
  description:
    "A stored file: objectId, sha256, size (bytes), contentType, name; query results add url to download it: over MCP a short-lived signed link (GET it as it is, no token), over /db/rpc the download path (GET it with the same bearer token)."
})

/** A small file given inline (e.g. by an agent through MCP): its bytes in base64, under the inline limit. */
export const InlineFile = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)),
  contentType: Schema.String.pipe(Schema.minLength(3), Schema.maxLength(255)),
  base64: Schema.String.pipe(Schema.maxLength(65_536))
})
export type InlineFile = typeof InlineFile.Type

/**
 * An operation input naming a file: the upload handle `POST /db/objects` answered, or a
 * small file inline. The handler sees the resolved `FileRef` (the engine resolves and
 * stores it in the caller's database before the operation runs), so it can store it in a
 * `File` field.
 */
export const Upload: Schema.Schema<FileRef, string | InlineFile> = Schema.Union(
  Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096)).annotations({
    description: "An upload handle answered by POST /db/objects (valid for a limited time, in your database only)."
  }),
  InlineFile.annotations({ description: "A small file inline: name, contentType and its bytes in base64." })
).annotations({ [UploadAnnotationId]: true, title: "Upload" }) as unknown as Schema.Schema<FileRef, string | InlineFile>

const annotated = (ast: AST.AST, id: symbol): boolean => {
  let current: AST.AST = ast
  for (;;) {
    if (Option.isSome(AST.getAnnotation<boolean>(current, id))) return true
    if (AST.isRefinement(current)) current = current.from
    else if (AST.isTransformation(current)) current = current.to
    else return false
  }
}

/** Whether a field schema (without null/undefined) is a file reference. */
export const isFileAst = (ast: AST.AST): boolean => annotated(ast, FileAnnotationId)

/** Whether an input field schema is an upload handle (optionally wrapped in null/undefined). */
export const isUploadAst = (ast: AST.AST): boolean =>
  annotated(ast, UploadAnnotationId) || (AST.isUnion(ast) && ast.types.some((t) => annotated(t, UploadAnnotationId)))

/** The top-level upload fields of an operation's input schema (a struct), by name. */
export const uploadFields = (input: Schema.Schema<any, any>): ReadonlyArray<string> => {
  let ast = input.ast
  while (AST.isTransformation(ast) || AST.isRefinement(ast)) ast = AST.isTransformation(ast) ? ast.from : ast.from
  if (!AST.isTypeLiteral(ast)) return []
  return ast.propertySignatures.filter((p) => isUploadAst(p.type)).map((p) => String(p.name))
}

/** The path to download an object: relative to the service's base URL, under the gated `/db`. */
export const downloadPath = (objectId: string): string => `/db/objects/${objectId}`

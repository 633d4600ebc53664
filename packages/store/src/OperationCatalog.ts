/**
 * A compiled operation catalog: the catalog plus exactly one handler per operation,
 * checked once at startup so a missing or stray handler never surfaces as a request.
 */
import { Context, Data, Effect, Layer } from "effect"
import type { Catalog, CompiledOperation } from "@cairn/catalog/Catalog"
import type * as Handler from "./Handler.js"
import type { Handlers } from "./Handlers.js"

export class OperationCatalogError extends Data.TaggedError("OperationCatalogError")<{
  readonly missing: ReadonlyArray<string>
  readonly extra: ReadonlyArray<string>
}> {
  override get message(): string {
    return [
      "The operation handlers do not match the catalog:",
      ...this.missing.map((k) => `- operation "${k}" has no handler`),
      ...this.extra.map((k) => `- handler "${k}" names no operation of the catalog`)
    ].join("\n")
  }
}

export interface OperationCatalogShape {
  readonly catalog: Catalog
  readonly handler: (operation: CompiledOperation) => Handler.Any
}

export const operationKey = (operation: { readonly owner: string; readonly name: string }): string =>
  `${operation.owner}.${operation.name}`

const make = (catalog: Catalog, handlers: Handlers): Effect.Effect<OperationCatalogShape, OperationCatalogError> =>
  Effect.suspend(() => {
    const expected = new Set(catalog.operations.map(operationKey))
    const given = Object.keys(handlers).filter((k) => typeof handlers[k] === "function")
    const missing = [...expected].filter((k) => !given.includes(k)).sort()
    const extra = given.filter((k) => !expected.has(k)).sort()
    if (missing.length > 0 || extra.length > 0) return Effect.fail(new OperationCatalogError({ missing, extra }))
    const table = new Map(given.map((k) => [k, handlers[k]!]))
    return Effect.succeed({ catalog, handler: (operation) => table.get(operationKey(operation))! })
  })

export class OperationCatalog extends Context.Tag("@cairn/store/OperationCatalog")<OperationCatalog, OperationCatalogShape>() {
  static readonly make = make
  /** From a compiled catalog, or an effect producing one (e.g. from the deployment). */
  static readonly layer = <E = never, R = never>(catalog: Catalog | Effect.Effect<Catalog, E, R>, handlers: Handlers) =>
    Layer.effect(
      OperationCatalog,
      Effect.flatMap(Effect.isEffect(catalog) ? catalog : Effect.succeed(catalog), (c) => make(c, handlers))
    )
}

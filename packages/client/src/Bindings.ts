/**
 * The runtime and types behind generated bindings (`npm run bindings`): per entity, a
 * typed `query` whose paths, filter values and rows follow the entity's fields, and one
 * function per operation with its input and output types. Calls go through `CairnClient`.
 */
import type { Basis } from "@cairn/domain/Query"
import type { Direction } from "@cairn/domain/QueryDocument"
import type { PublicError } from "@cairn/domain/PublicError"
import type { Receipt } from "@cairn/domain/Receipt"
import { Effect } from "effect"
import { CairnClient } from "./CairnClient.js"
import { newInvocationId } from "./InvocationId.js"
import type { TransportError } from "./TransportError.js"

export interface OperationShape {
  readonly targeted: boolean
  readonly input: unknown
  readonly output: unknown
}

export interface EntityShape {
  /** Field name to the type of its values in rows (`null` included when the field is optional). */
  readonly fields: { readonly [field: string]: unknown }
  /** Relationship name to the target entity's name. */
  readonly relationships: { readonly [relationship: string]: string }
  readonly operations: { readonly [operation: string]: OperationShape }
}

export interface SchemaShape {
  readonly [entity: string]: EntityShape
}

type Prev = [never, 0, 1, 2, 3]

/** Every path a query may name on `E`: `id`, a field, or relationships (up to `Hops`) then a field. */
export type PathOf<S extends SchemaShape, E extends keyof S, Hops extends number = 2> =
  | readonly ["id"]
  | { [F in keyof S[E]["fields"] & string]: readonly [F] }[keyof S[E]["fields"] & string]
  | (Hops extends 0
      ? never
      : {
          [R in keyof S[E]["relationships"] & string]: readonly [R, ...PathOf<S, S[E]["relationships"][R] & keyof S, Prev[Hops]>]
        }[keyof S[E]["relationships"] & string])

/** The type of the value at `P` on `E`; a path through a relationship may yield `null`. */
export type ValueAt<S extends SchemaShape, E extends keyof S, P> = P extends readonly [infer F]
  ? F extends "id"
    ? string
    : F extends keyof S[E]["fields"]
      ? S[E]["fields"][F]
      : never
  : P extends readonly [infer R, ...infer Rest]
    ? R extends keyof S[E]["relationships"]
      ? ValueAt<S, S[E]["relationships"][R] & keyof S, Rest> | null
      : never
    : never

type ConditionOn<S extends SchemaShape, E extends keyof S, P> = P extends unknown
  ?
      | { readonly op: "eq" | "ne" | "lt" | "lte" | "gt" | "gte"; readonly path: P; readonly value: ValueAt<S, E, P> }
      | { readonly op: "startsWith" | "contains"; readonly path: P; readonly value: string }
      | { readonly op: "in" | "notIn"; readonly path: P; readonly value: ReadonlyArray<ValueAt<S, E, P>> }
      | { readonly op: "isNull"; readonly path: P }
  : never

/** A QueryDocumentV1 filter over `E`, with paths and values checked against its fields. */
export type FilterOf<S extends SchemaShape, E extends keyof S> =
  | ConditionOn<S, E, PathOf<S, E>>
  | { readonly op: "and" | "or"; readonly filters: ReadonlyArray<FilterOf<S, E>> }
  | { readonly op: "not"; readonly filter: FilterOf<S, E> }

export interface SelectionOf<S extends SchemaShape, E extends keyof S> {
  readonly [column: string]: { readonly path: PathOf<S, E> }
}

export type RowOf<S extends SchemaShape, E extends keyof S, Sel> = {
  readonly [K in keyof Sel]: Sel[K] extends { readonly path: infer P } ? ValueAt<S, E, P> : never
}

export interface QueryArgs<S extends SchemaShape, E extends keyof S, Sel extends SelectionOf<S, E>> {
  /** Output column name to the path it reads. */
  readonly select: Sel
  readonly where?: FilterOf<S, E>
  readonly order?: ReadonlyArray<{ readonly path: PathOf<S, E>; readonly direction: Direction }>
  readonly page?: { readonly first?: number; readonly after?: string }
  /** The catalog token this request was built against; a stale one fails with `CatalogChanged`. */
  readonly ifCatalog?: string
}

export interface TypedQueryResult<Row> {
  readonly rows: ReadonlyArray<Row>
  /** Pass back as `page.after` for the next page. */
  readonly cursor?: string
  readonly basis: Basis
}

type InputArg<I> = {} extends I ? { readonly input?: I } : { readonly input: I }

export type OperationArgs<O extends OperationShape> = (O["targeted"] extends true
  ? { /** The id of the record the operation acts on. */ readonly target: string }
  : unknown) &
  InputArg<O["input"]> & {
    /** Names this intent; generated (UUIDv7) when absent. Reuse it to retry the same intent. */
    readonly invocationId?: string
    readonly ifCatalog?: string
  }

export interface TypedReceipt<Output> extends Omit<Receipt, "output"> {
  readonly output: Output
}

export type CallError = PublicError | TransportError

export type EntityBinding<S extends SchemaShape, E extends keyof S & string> = {
  readonly query: <const Sel extends SelectionOf<S, E>>(
    args: QueryArgs<S, E, Sel>
  ) => Effect.Effect<TypedQueryResult<RowOf<S, E, Sel>>, CallError, CairnClient>
} & {
  readonly [Op in keyof S[E]["operations"]]: (
    args: OperationArgs<S[E]["operations"][Op]>
  ) => Effect.Effect<TypedReceipt<S[E]["operations"][Op]["output"]>, CallError, CairnClient>
}

export type Bindings<S extends SchemaShape> = { readonly [E in keyof S & string]: EntityBinding<S, E> }

/** What the runtime needs besides the types: each entity's operations and whether they take a target. */
export interface BindingsMeta {
  readonly [entity: string]: { readonly [operation: string]: { readonly targeted: boolean } }
}

interface AnyQueryArgs {
  readonly select: unknown
  readonly where?: unknown
  readonly order?: unknown
  readonly page?: unknown
  readonly ifCatalog?: string
}

interface AnyOperationArgs {
  readonly target?: string
  readonly input?: unknown
  readonly invocationId?: string
  readonly ifCatalog?: string
}

const entityBinding = (entity: string, operations: BindingsMeta[string]) => {
  const binding: Record<string, (args: any) => Effect.Effect<unknown, CallError, CairnClient>> = {
    query: (args: AnyQueryArgs) =>
      Effect.flatMap(CairnClient, (client) =>
        client.query({
          ...(args.ifCatalog !== undefined ? { ifCatalog: args.ifCatalog } : {}),
          query: {
            version: 1,
            from: { kind: "entity", name: entity },
            select: args.select as never,
            ...(args.where !== undefined ? { where: args.where as never } : {}),
            ...(args.order !== undefined ? { order: args.order as never } : {}),
            ...(args.page !== undefined ? { page: args.page as never } : {})
          }
        })
      )
  }
  for (const [name, { targeted }] of Object.entries(operations)) {
    binding[name] = (args: AnyOperationArgs) =>
      Effect.flatMap(CairnClient, (client) =>
        client.mutate({
          ...(args.ifCatalog !== undefined ? { ifCatalog: args.ifCatalog } : {}),
          operation: { kind: "operation", owner: { kind: "entity", name: entity }, name },
          ...(targeted && args.target !== undefined ? { target: { kind: "entity", entity, id: args.target } } : {}),
          input: args.input ?? {},
          invocationId: args.invocationId ?? newInvocationId()
        })
      )
  }
  return binding
}

/**
 * Builds the bindings of a generated schema. Results are typed from the catalog's
 * published schemas: the server encodes rows and outputs with them.
 */
export const makeBindings = <S extends SchemaShape>(meta: BindingsMeta): Bindings<S> =>
  Object.fromEntries(Object.entries(meta).map(([entity, operations]) => [entity, entityBinding(entity, operations)])) as Bindings<S>

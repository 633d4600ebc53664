/**
 * The handlers of an application's operations, keyed `"Owner.name"`, with input,
 * output and target types inferred from the operation and entity definitions.
 */
import type { Schema } from "effect"
import type { Operation } from "@cairn/catalog"
import type * as Handler from "./Handler.js"
import type { Entities, EntityNamed, RecordOf } from "./Tx.js"

/** `"Owner.name"`, distributed over a union of operations (never a cross product). */
export type Key<O extends Operation.Any> = O extends Operation.Any ? `${O["owner"]}.${O["name"]}` : never

/** The handler type of operation `O` over entities `Es`. */
export type HandlerOf<O extends Operation.Any, Es extends Entities> = Handler.Handler<
  Schema.Schema.Type<O["input"]>,
  Schema.Schema.Type<O["output"]>,
  O["targeted"] extends true ? RecordOf<EntityNamed<Es, O["owner"]>> : undefined,
  Es
>

export type Handlers = { readonly [key: string]: Handler.Any }

/** The operation among `O` whose key is `K`. */
export type OperationAt<O, K> = O extends Operation.Any ? (Key<O> extends K ? O : never) : never

/**
 * One handler per operation key. Mapped over the keys (not with an `as` clause) so
 * handler parameters are contextually typed.
 */
export type HandlersOf<Os extends ReadonlyArray<Operation.Any>, Es extends Entities> = {
  readonly [K in Key<Os[number]>]: HandlerOf<OperationAt<Os[number], K>, Es>
}

/**
 * Types handlers against definitions: the application's root schema (so adding an
 * operation to the root schema is the only list to edit), or any `{ entities, operations }`.
 * `OperationCatalog.make` checks at startup that every operation of the compiled
 * catalog has exactly one handler.
 */
export const make = <const Es extends Entities, const Os extends ReadonlyArray<Operation.Any>>(
  _definitions: { readonly entities: Es; readonly operations: Os },
  handlers: HandlersOf<Os, Es>
): Handlers => handlers as unknown as Handlers

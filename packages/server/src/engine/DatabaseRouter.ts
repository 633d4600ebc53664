/**
 * Which process runs a caller's database: the one seam between the engine and its
 * placement. `DataPlane` admits every verb itself (scope, bounds, decode, policy view,
 * `ifCatalog`), then asks the router to run the part that needs the database. Embedded,
 * that is always here (`DatabaseRouter.local`); in a cluster it is the process holding the
 * database's entity, which runs the same local pipeline (`DataPlane.here`), so answers and
 * errors are the same as on one process. Required, never defaulted: every assembly names
 * its placement.
 */
import { type Principal } from "@cairn/domain/Principal"
import { type QueryResult } from "@cairn/domain/Query"
import { type Receipt } from "@cairn/domain/Receipt"
import { type SnapshotPage } from "@cairn/domain/Sync"
import { type ReadableDatabase } from "@cairn/store/Database"
import { type Databases } from "@cairn/store/Databases"
import { Context, type Effect, Layer, type Option, type Scope } from "effect"
import { type DataPlane as DataPlaneTag } from "./DataPlane.js"
import { type EngineError } from "./Refusal.js"
import { type Deployment } from "./Deployment.js"
import { type Settings } from "../operations/Settings.js"

export interface DatabaseRouterShape {
  /**
   * An admitted mutation: `here` (the local pipeline on this process's writer), or the same
   * `(principal, payload)` sent to the process that runs the principal's database.
   */
  readonly mutate: <R>(principal: Principal, payload: unknown, here: Effect.Effect<Receipt, EngineError, R>) => Effect.Effect<Receipt, EngineError, R>
  /** An admitted query: `here` when this process holds the database, else forwarded to the process that does. */
  readonly query: <R>(principal: Principal, payload: unknown, here: Effect.Effect<QueryResult, EngineError, R>) => Effect.Effect<QueryResult, EngineError, R>
  /** An admitted snapshot page: as `query`. */
  readonly snapshot: <R>(
    principal: Principal,
    payload: unknown,
    here: Effect.Effect<SnapshotPage, EngineError, R>
  ) => Effect.Effect<SnapshotPage, EngineError, R>
  /**
   * Where reads run when this process does not write the database: a followed copy at `atLeast` or
   * later, held for the current scope, or None when there is none in time (then `query` and
   * `snapshot` forward to the writer, and live changes and downloads answer a retryable refusal).
   * Undefined: every read runs on this process's own store (the embedded default).
   */
  readonly copies: ((principal: Principal, atLeast: number) => Effect.Effect<Option.Option<ReadableDatabase>, never, Scope.Scope>) | undefined
}

export class DatabaseRouter extends Context.Tag("@cairn/server/DatabaseRouter")<DatabaseRouter, DatabaseRouterShape>() {
  /** One process holds every database: everything runs here (the embedded default). */
  static readonly local: Layer.Layer<DatabaseRouter> = Layer.succeed(DatabaseRouter, {
    mutate: (_principal, _payload, here) => here,
    query: (_principal, _payload, here) => here,
    snapshot: (_principal, _payload, here) => here,
    copies: undefined
  })
}

/**
 * How a role places the engine: it takes the engine as assembled (which needs a router and a
 * store) and answers it with both provided, plus whatever else the role runs beside it (a runner's
 * entities). Embedded, that is `DatabaseRouter.local`; the cluster roles are `@cairn/cluster/Roles`.
 */
export interface Placement {
  <E, R>(engine: Layer.Layer<DataPlaneTag, E, R>): Layer.Layer<DataPlaneTag, unknown, Exclude<R, DatabaseRouter | Databases> | Settings | Deployment>
}

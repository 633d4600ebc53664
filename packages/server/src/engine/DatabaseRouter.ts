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
import { Context, Effect, Layer } from "effect"
import { type DataPlane as DataPlaneTag } from "./DataPlane.js"
import { type EngineError, type Unavailable } from "./Refusal.js"

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
   * Whether verbs that are never forwarded (live changes, the file verbs) may open the
   * principal's database in this process: succeeds, or answers the retryable `Unavailable`.
   */
  readonly servesHere: (principal: Principal) => Effect.Effect<void, Unavailable>
}

export class DatabaseRouter extends Context.Tag("@cairn/server/DatabaseRouter")<DatabaseRouter, DatabaseRouterShape>() {
  /** One process holds every database: everything runs here (the embedded default). */
  static readonly local: Layer.Layer<DatabaseRouter> = Layer.succeed(DatabaseRouter, {
    mutate: (_principal, _payload, here) => here,
    query: (_principal, _payload, here) => here,
    snapshot: (_principal, _payload, here) => here,
    servesHere: () => Effect.void
  })
}

/**
 * How a role places the engine: it takes the engine as assembled (which needs a router) and
 * answers it with the router provided, plus whatever else the role runs beside it (a runner's
 * entities). Embedded, that is `DatabaseRouter.local`; the cluster roles are `@cairn/cluster/Roles`.
 */
export interface Placement {
  <E, R>(engine: Layer.Layer<DataPlaneTag, E, R>): Layer.Layer<DataPlaneTag, unknown, Exclude<R, DatabaseRouter>>
}

/**
 * Hosting the database entities on a runner: each forwarded call runs the engine's local
 * pipeline (`DataPlane.here`), so a mutation is admitted, checked against the catalog and
 * written exactly as on one process, and its answers and errors are the same. The front's
 * request id (header `x-request-id`) becomes this process's correlation id, so the runner's
 * log lines carry it; the cluster parents the handler's span under the front's.
 */
import { join } from "node:path"
import * as Entity from "@effect/cluster/Entity"
import { SqlClient } from "@effect/sql"
import { type Principal } from "@cairn/domain/Principal"
import { Correlation, type CorrelationShape, requestIdHeader } from "@cairn/server/engine/Correlation"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { CurrentTransport } from "@cairn/server/engine/EngineMetrics"
import { type InternalFailure, internalFailure, Unavailable } from "@cairn/server/engine/Refusal"
import { Databases, databaseId } from "@cairn/store/Databases"
import { ObjectStore } from "@cairn/store/ObjectStore"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { type DatabaseId } from "@cairn/domain/Ids"
import { currentElapsedMillis } from "@cairn/domain/Elapsed"
import { Cause, Clock, type Duration, Effect, Exit, Option, Schema } from "effect"
import * as ArchiveRestore from "../archive/ArchiveRestore.js"
import { type AdminCall, type AdminKey, verify as verifyAdmin } from "./AdminCall.js"
import {
  AdminRefused,
  AdminUnavailable,
  type Call,
  CloseAction,
  type CloseAnswer,
  DatabaseEntity,
  RestoreAction,
  type RestoreAnswer
} from "./DatabaseEntity.js"
import { type CallKey, verify } from "./SignedCall.js"

export interface HostOptions {
  /** How long an entity without calls stays active (then its scope closes and reads go through it again). */
  readonly maxIdleTime: Duration.DurationInput
  /** The key forwarded calls are signed with (from the deployment secret, the same on every process). */
  readonly key: CallKey
  /** The key operators' messages are signed with (`cairn restore`, `cairn move`). */
  readonly adminKey: AdminKey
}

/** More than calls ever run at once in one entity: an operator's action takes them all, so it waits for every call in flight. */
const allCalls = 1_000_000

/** The entity's handlers, built once per activation of a database's entity on this runner. */
const build = (key: CallKey, adminKey: AdminKey) => Effect.gen(function* () {
  const plane = yield* DataPlane
  const databases = yield* Databases
  const address = yield* Entity.CurrentAddress
  const runner = yield* Entity.CurrentRunnerAddress
  const runnerName = `${runner.host}:${runner.port}`
  const archiveContext = yield* Effect.context<SqlClient.SqlClient | ObjectStore>()
  const { catalog } = yield* OperationCatalog
  const { dataDir } = yield* StoreConfig
  const id = address.entityId as string
  const filename = join(dataDir, "databases", `${id}.sqlite`)
  /**
   * While an operator's action holds the database (its writer drained and closed, its file being
   * rebuilt), why: every call is refused at once, retryably, instead of reopening the file under it.
   */
  let heldFor: string | undefined
  /** Calls in flight take one permit each; an operator's action takes them all (see `allCalls`). */
  const calls = yield* Effect.makeSemaphore(allCalls)
  /** One operator's action at a time. */
  const actions = yield* Effect.makeSemaphore(1)
  // The database's writer is activated by the first call, inside this entity's lifetime, and closed with
  // it: once the entity stops here (idle, or its shard moved) no writer of it stays open on this runner.
  yield* Effect.addFinalizer(() => databases.close(id as DatabaseId))
  yield* Effect.logDebug("database entity active").pipe(Effect.annotateLogs({ database: id }))

  /** One forwarded verb: under the front's request id, for the database this entity is; one log line each, as the front's. */
  const serve =
    <A, E extends { readonly _tag: string }>(verb: string, run: (principal: Principal, payload: unknown) => Effect.Effect<A, E>) =>
    (request: { readonly payload: Call; readonly headers: Readonly<Record<string, string | undefined>> }) => {
      const correlation = { id: request.headers[requestIdHeader] ?? Correlation.make().id } as CorrelationShape
      const held = (): Effect.Effect<A, E | InternalFailure | Unavailable> =>
        Effect.fail(new Unavailable({ message: `Your database is ${heldFor} by an operator right now; nothing was applied. Retry shortly.` }))
      const body = Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<A, E | InternalFailure | Unavailable> => {
        if (heldFor !== undefined) return held()
        const call = verify(key, request.payload, now)
        if (Option.isNone(call)) {
          return Effect.flatMap(
            internalFailure(verb, Cause.die("a forwarded call without a valid signature of this deployment (does CAIRN_SECRET differ between processes, or the clocks by minutes?)")),
            Effect.fail
          )
        }
        const { payload, principal } = call.value
        // The cluster routes by the key's digest; a call for another database is a defect of the router.
        return databaseId(principal.databaseKey) === id
          ? calls.withPermits(1)(Effect.suspend(() => (heldFor !== undefined ? held() : run(principal, payload))))
          : Effect.flatMap(internalFailure(verb, Cause.die("a forwarded call reached another database's entity")), Effect.fail)
      })
      return Effect.flatMap(currentElapsedMillis, (started) =>
        body.pipe(
          Effect.onExit((exit) =>
            Effect.flatMap(Effect.all([currentElapsedMillis, Effect.option(Effect.currentSpan)]), ([now, span]) =>
              Effect.logInfo(`entity ${verb}`).pipe(
                Effect.annotateLogs({
                  verb,
                  // The cluster parents this call's span under the front's: one trace across the hop.
                  ...(Option.isSome(span) ? { traceId: span.value.traceId } : {}),
                  durationMs: Math.round(now - started),
                  // As the front's line: a receipt's outcome or a public code (noted by the engine), else the refusal.
                  outcome:
                    correlation.outcome ??
                    (Exit.isSuccess(exit)
                      ? "ok"
                      : Cause.isInterruptedOnly(exit.cause)
                        ? "interrupted"
                        : Option.getOrElse(Option.map(Cause.failureOption(exit.cause), (e) => e._tag), () => "defect")),
                  ...(correlation.invocationId !== undefined ? { invocationId: correlation.invocationId } : {})
                })
              )
            )
          ),
          Effect.provideService(Correlation, correlation),
          Effect.provideService(CurrentTransport, "cluster"),
          Effect.annotateLogs({ requestId: correlation.id, database: id })
        )
      )
    }

  /**
   * An operator's action, once its signature and action check out: calls are refused from now on
   * (`heldFor`), the ones in flight finish, the database closes here (its writer drained, every commit
   * shipped), then `act` runs uninterruptibly; calls are taken again once it is done, whatever its outcome.
   */
  const admin =
    <I, A extends { readonly unavailableMillis: number }>(verb: string, holding: string, schema: Schema.Schema<I, any>, act: (action: I, wasOpen: boolean) => Effect.Effect<Omit<A, "unavailableMillis">, AdminRefused | AdminUnavailable>) =>
    (request: { readonly payload: AdminCall }) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const decoded = Option.flatMap(verifyAdmin(adminKey, request.payload, id, now), Schema.decodeUnknownOption(schema))
        if (Option.isNone(decoded)) {
          yield* Effect.logWarning(`operator's ${verb} refused: not signed by this deployment (does CAIRN_SECRET differ?), expired, or not a ${verb}`)
          return yield* new AdminRefused({ message: `the ${verb} was refused: it is not signed with this deployment's CAIRN_SECRET, it expired, or it is malformed; nothing was changed` })
        }
        return yield* actions.withPermits(1)(
          Effect.gen(function* () {
            const started = yield* Clock.currentTimeMillis
            heldFor = holding
            return yield* calls.withPermits(allCalls)(
              Effect.gen(function* () {
                // The store's own hold (as `DatabaseAdmin` takes it embedded): no activation of this file until `act` is done.
                const wasOpen = yield* databases.hold(id as DatabaseId, holding).pipe(
                  Effect.mapError(() => new AdminRefused({ message: `the ${verb} was refused: another operator's action holds the database; nothing was changed` }))
                )
                const answer = yield* act(decoded.value, wasOpen)
                const unavailableMillis = (yield* Clock.currentTimeMillis) - started
                yield* Effect.logInfo(`operator's ${verb} done`).pipe(Effect.annotateLogs({ ...answer, wasOpen, unavailableMillis }))
                return { ...answer, unavailableMillis } as A
              }).pipe(Effect.scoped)
            ).pipe(
              Effect.uninterruptible,
              Effect.ensuring(Effect.sync(() => (heldFor = undefined)))
            )
          })
        )
      }).pipe(Effect.annotateLogs({ database: id, verb }))

  const restore = admin<RestoreAction, RestoreAnswer>("restore", "being restored", RestoreAction, (action) =>
    ArchiveRestore.restore({ databaseId: id, catalog, filename, target: action.to }).pipe(
      Effect.provide(archiveContext),
      Effect.map((restored) => ({
        position: restored.position,
        generation: restored.generation,
        previousPosition: restored.previousPosition,
        previousGeneration: restored.previousGeneration,
        runner: runnerName
      })),
      Effect.catchTags({
        RestoreRefused: (refused) => Effect.fail(new AdminRefused({ message: refused.message })),
        ArchiveFailed: (failed) =>
          failed.reason === "diverged"
            ? Effect.zipRight(
                Effect.logError("online restore: the archive cannot build the target", failed.cause),
                Effect.fail(new AdminRefused({ message: `Restore refused: the archive cannot build that position (${String((failed.cause as Error | undefined)?.message ?? failed.reason)}); nothing was changed` }))
              )
            : Effect.zipRight(
                Effect.logWarning("online restore: the archive is unavailable", failed.cause),
                Effect.fail(new AdminUnavailable({ message: "Restore failed: the archive (PostgreSQL or the object store) could not be reached; nothing was changed, retry" }))
              )
      })
    )
  )

  const close = admin<typeof CloseAction.Type, CloseAnswer>("close", "being moved", CloseAction, (_action, wasOpen) =>
    Effect.succeed({ runner: runnerName, wasOpen })
  )

  return {
    Mutate: serve("mutate", plane.here.mutate),
    Query: serve("query", plane.here.query),
    Snapshot: serve("snapshot", plane.here.snapshot),
    Restore: restore,
    Close: close
  }
})

/**
 * The entity on this runner. Unbounded concurrency per entity: the writer's group commit
 * batches concurrent mutations of one database, which a one-at-a-time mailbox would defeat.
 */
export const layer = (options: HostOptions) =>
  DatabaseEntity.toLayer(build(options.key, options.adminKey), { concurrency: "unbounded", maxIdleTime: options.maxIdleTime })

/**
 * Hosting the database entities on a runner: each forwarded call runs the engine's local
 * pipeline (`DataPlane.here`), so a mutation is admitted, checked against the catalog and
 * written exactly as on one process, and its answers and errors are the same. The front's
 * request id (header `x-request-id`) becomes this process's correlation id, so the runner's
 * log lines carry it; the cluster parents the handler's span under the front's.
 */
import * as Entity from "@effect/cluster/Entity"
import { type Principal } from "@cairn/domain/Principal"
import { Correlation, type CorrelationShape, requestIdHeader } from "@cairn/server/engine/Correlation"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { CurrentTransport } from "@cairn/server/engine/EngineMetrics"
import { type InternalFailure, internalFailure } from "@cairn/server/engine/Refusal"
import { Databases, databaseId } from "@cairn/store/Databases"
import { type DatabaseId } from "@cairn/domain/Ids"
import { currentElapsedMillis } from "@cairn/domain/Elapsed"
import { Cause, Clock, type Duration, Effect, Exit, Option } from "effect"
import { type Call, DatabaseEntity } from "./DatabaseEntity.js"
import { type CallKey, verify } from "./SignedCall.js"

export interface HostOptions {
  /** How long an entity without calls stays active (then its scope closes and reads go through it again). */
  readonly maxIdleTime: Duration.DurationInput
  /** The key forwarded calls are signed with (from the deployment secret, the same on every process). */
  readonly key: CallKey
}

/** The entity's handlers, built once per activation of a database's entity on this runner. */
const build = (key: CallKey) => Effect.gen(function* () {
  const plane = yield* DataPlane
  const databases = yield* Databases
  const address = yield* Entity.CurrentAddress
  const id = address.entityId as string
  // The database's writer is activated by the first call, inside this entity's lifetime, and closed with
  // it: once the entity stops here (idle, or its shard moved) no writer of it stays open on this runner.
  yield* Effect.addFinalizer(() => databases.close(id as DatabaseId))
  yield* Effect.logDebug("database entity active").pipe(Effect.annotateLogs({ database: id }))

  /** One forwarded verb: under the front's request id, for the database this entity is; one log line each, as the front's. */
  const serve =
    <A, E extends { readonly _tag: string }>(verb: string, run: (principal: Principal, payload: unknown) => Effect.Effect<A, E>) =>
    (request: { readonly payload: Call; readonly headers: Readonly<Record<string, string | undefined>> }) => {
      const correlation = { id: request.headers[requestIdHeader] ?? Correlation.make().id } as CorrelationShape
      const body = Effect.flatMap(Clock.currentTimeMillis, (now): Effect.Effect<A, E | InternalFailure> => {
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
          ? run(principal, payload)
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

  return {
    Mutate: serve("mutate", plane.here.mutate),
    Query: serve("query", plane.here.query),
    Snapshot: serve("snapshot", plane.here.snapshot)
  }
})

/**
 * The entity on this runner. Unbounded concurrency per entity: the writer's group commit
 * batches concurrent mutations of one database, which a one-at-a-time mailbox would defeat.
 */
export const layer = (options: HostOptions) =>
  DatabaseEntity.toLayer(build(options.key), { concurrency: "unbounded", maxIdleTime: options.maxIdleTime })

/**
 * `DatabaseRouter` in a cluster: a database's writer runs only inside its entity, wherever
 * the cluster placed it. Mutations always go to the entity (delivered locally when the shard
 * is here). Reads run on this process's followed copy of the database (`Followers`) when it
 * holds the caller's position in time; otherwise queries and snapshot pages go to the entity.
 *
 * A send to an unassigned shard is retried by the cluster forever, so every hop has the
 * front's own deadline (then the retryable `Unavailable`). A hop that breaks (the runner
 * died, the connection dropped) is sent again with the same payload, so a mutation keeps its
 * invocationId: exactly once comes from the writer's receipts, not from the transport.
 */
import { type Sharding } from "@effect/cluster/Sharding"
import { isPublicError } from "@cairn/domain/PublicError"
import { Overloaded } from "@cairn/domain/Overloaded"
import { type Principal } from "@cairn/domain/Principal"
import { Correlation, requestIdHeader } from "@cairn/server/engine/Correlation"
import { DatabaseRouter } from "@cairn/server/engine/DatabaseRouter"
import { type EngineError, isRefusal, Unavailable } from "@cairn/server/engine/Refusal"
import { databaseId } from "@cairn/store/Databases"
import { Cause, Clock, Data, type Duration, Effect, Layer, Option, Predicate, Schedule } from "effect"
import { type Call, DatabaseEntity } from "./entity/DatabaseEntity.js"
import { Followers } from "./replica/Followers.js"
import { type CallKey, sign } from "./entity/SignedCall.js"

export interface HopOptions {
  /** How long a forwarded call may take, retries included, before the caller is told to retry. */
  readonly timeout: Duration.DurationInput
  /** The pause between two attempts of a hop that broke. */
  readonly retryInterval: Duration.DurationInput
  /** The key forwarded calls are signed with (from the deployment secret, the same on every process). */
  readonly key: CallKey
}

/** A hop that did not bring back the engine's answer (transport, a dead runner, a shutdown). */
class HopBroken extends Data.TaggedError("HopBroken")<{ readonly cause: Cause.Cause<unknown> }> {}

const isEngineError = (u: unknown): u is EngineError => isPublicError(u) || isRefusal(u)

/** Builds the cluster's router. Needs `Sharding` (a runner's, or a front's client-only one) and this process's `Followers`. */
export const layer = (options: HopOptions): Layer.Layer<DatabaseRouter, never, Sharding | Followers> =>
  Layer.effect(
    DatabaseRouter,
    Effect.gen(function* () {
      const followers = yield* Followers
      const clientFor = yield* DatabaseEntity.client

      /** One forwarded call, with the front's request id and deadline, retried while the hop breaks. */
      const forward = <A>(
        principal: Principal,
        payload: unknown,
        send: (client: ReturnType<typeof clientFor>, call: Call, headers: Record<string, string>) => Effect.Effect<A, unknown>
      ): Effect.Effect<A, EngineError> =>
        Effect.gen(function* () {
          const requestId = yield* Correlation.id
          const client = clientFor(databaseId(principal.databaseKey))
          // Signed once: every attempt sends the very same call (a mutation keeps its invocationId).
          const call = sign(options.key, principal, payload, yield* Clock.currentTimeMillis)
          const attempt = send(client, call, { [requestIdHeader]: requestId }).pipe(
            Effect.sandbox,
            Effect.mapError((cause): EngineError | HopBroken => {
              const failure = Cause.failureOption(cause)
              if (Option.isSome(failure)) {
                if (isEngineError(failure.value)) return failure.value
                // The entity's mailbox is full: the same answer as a full writer queue.
                if (Predicate.isTagged(failure.value, "MailboxFull")) {
                  return new Overloaded({ message: "The database is busy; nothing was applied. Retry the same request shortly.", retryAfterSeconds: 1 })
                }
              }
              return new HopBroken({ cause })
            }),
            Effect.tapError((error) =>
              error._tag === "HopBroken" ? Effect.logDebug("forwarded call broke; sending it again", error.cause) : Effect.void
            )
          )
          return yield* attempt.pipe(
            Effect.retry({ while: (error) => error._tag === "HopBroken", schedule: Schedule.spaced(options.retryInterval) }),
            Effect.timeoutFail({ duration: options.timeout, onTimeout: () => new HopBroken({ cause: Cause.empty }) }),
            Effect.catchTag("HopBroken", (error) =>
              Effect.zipRight(
                Effect.logWarning("the database's process did not answer in time", error.cause),
                Effect.fail(
                  new Unavailable({
                    message: `Your database did not answer in time; this was logged as ${requestId}. Retry shortly (a mutation with the same invocationId is applied at most once).`
                  })
                )
              )
            )
          )
        })

      return {
        mutate: (principal, payload) => forward(principal, payload, (client, call, headers) => client.Mutate(call, { headers })),
        // Reads run on a followed copy when this process has one at the caller's position in time (see
        // `DataPlane`); these are what the writer answers otherwise.
        query: (principal, payload) => forward(principal, payload, (client, call, headers) => client.Query(call, { headers })),
        snapshot: (principal, payload) => forward(principal, payload, (client, call, headers) => client.Snapshot(call, { headers })),
        copies: (principal, atLeast) => followers.read(databaseId(principal.databaseKey), atLeast)
      }
    })
  )

/**
 * The operator's side of online per-tenant operations (`cairn restore`, `cairn move` in a cluster
 * role): this process joins the cluster as a client only (it holds no shards, as a front) and sends
 * one signed message to the database's entity, wherever the cluster placed it. Nothing local is
 * touched: the entity does the work on the runner that owns the database, while every other
 * database keeps serving.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Clock, Data, Duration, Effect, Layer, Option, Predicate } from "effect"
import { type ClusterSettingsShape } from "@cairn/server/operations/RoleSettings"
import { shardingLayer } from "../Roles.js"
import { adminKey, sign } from "../entity/AdminCall.js"
import { type CloseAnswer, DatabaseEntity, type RestoreAction, type RestoreAnswer } from "../entity/DatabaseEntity.js"

/** Operator-facing: what the entity (or the cluster) answered instead of doing it. */
export class AdminFailed extends Data.TaggedError("AdminFailed")<{ readonly message: string }> {}

export interface AdminOptions {
  /** How long to wait for the entity's answer (its activation, the restore itself). */
  readonly timeout?: Duration.DurationInput | undefined
}

/** One signed message to the entity of `databaseId`, answered or turned into one operator line. */
const send = <A>(
  cluster: ClusterSettingsShape,
  databaseId: string,
  action: unknown,
  call: (client: ReturnType<Effect.Effect.Success<typeof DatabaseEntity.client>>, payload: ReturnType<typeof sign>) => Effect.Effect<A, unknown>,
  options: AdminOptions
): Effect.Effect<A, AdminFailed> =>
  Effect.gen(function* () {
    const clientFor = yield* DatabaseEntity.client
    const payload = sign(adminKey(cluster.secret), databaseId, action, yield* Clock.currentTimeMillis)
    return yield* call(clientFor(databaseId), payload).pipe(
      Effect.timeoutFail({
        duration: options.timeout ?? Duration.minutes(5),
        onTimeout: () => new AdminFailed({ message: "the database's runner did not answer in time (is a runner up? see its log); the action may still complete there" })
      }),
      Effect.catchAllCause((cause) => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure)) {
          const error = failure.value
          if (Predicate.isTagged(error, "AdminFailed")) return Effect.fail(error as AdminFailed)
          if (Predicate.isTagged(error, "AdminRefused") || Predicate.isTagged(error, "AdminUnavailable")) {
            return Effect.fail(new AdminFailed({ message: String((error as unknown as { readonly message: unknown }).message) }))
          }
        }
        return Effect.fail(new AdminFailed({ message: `the cluster could not deliver the message: ${Cause.pretty(cause).split("\n")[0]}` }))
      })
    )
  }).pipe(
    Effect.scoped,
    Effect.provide(shardingLayer(cluster, false).pipe(Layer.provide(PgClient.layer({ url: cluster.databaseUrl })))),
    Effect.catchAllDefect((defect) => Effect.fail(new AdminFailed({ message: `cannot join the cluster: ${String(defect)}` })))
  ) as Effect.Effect<A, AdminFailed>

/** Restores database `databaseId` to `to`, online, on the runner that owns it. */
export const restore = (cluster: ClusterSettingsShape, databaseId: string, to: RestoreAction["to"], options: AdminOptions = {}): Effect.Effect<RestoreAnswer, AdminFailed> =>
  send(cluster, databaseId, { kind: "restore", to } satisfies RestoreAction, (client, payload) => client.Restore(payload), options)

/**
 * Closes database `databaseId` where it runs (cleanly: every commit shipped, the archive's state); its
 * next call opens it on the runner its shard is assigned to now.
 */
export const close = (cluster: ClusterSettingsShape, databaseId: string, options: AdminOptions = {}): Effect.Effect<CloseAnswer, AdminFailed> =>
  send(cluster, databaseId, { kind: "close" }, (client, payload) => client.Close(payload), options)

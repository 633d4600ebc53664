/**
 * The layers of each cluster role, in one place. A runner holds shards: the database
 * entities run here, and its HTTP front takes requests like any process. A front holds no
 * shards and forwards what needs a database to the entity that has it. Every process reads from
 * followed copies of the databases it serves (a replica is a front that only reads in practice:
 * the same process kind, named for what the operator runs it for). Shard locks, runners and messages live in the
 * cluster's PostgreSQL; runners talk to each other over sockets. Loaded only by the cluster
 * roles (`apps/server` imports this module dynamically), so the embedded default never loads
 * `@effect/cluster` or `pg`.
 */
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as PgClient from "@effect/sql-pg/PgClient"
import { type DataPlane } from "@cairn/server/engine/DataPlane"
import { type DatabaseRouter, type Placement } from "@cairn/server/engine/DatabaseRouter"
import { type Deployment } from "@cairn/server/engine/Deployment"
import { type Settings } from "@cairn/server/operations/Settings"
import { type Databases } from "@cairn/store/Databases"
import { databasesWith, OperationCatalogLive, StoreConfigLive } from "@cairn/server/engine/DatabasesLive"
import { ObjectStoreLive } from "@cairn/server/engine/ObjectStoreLive"
import { type ClusterSettingsShape, type Role } from "@cairn/server/operations/RoleSettings"
import { Cause, Duration, Layer, Option, Schedule } from "effect"
import * as ClusterRouter from "./ClusterRouter.js"
import * as DatabaseHost from "./entity/DatabaseHost.js"
import * as PgArchive from "./archive/PgArchive.js"
import { Followers } from "./replica/Followers.js"
import { callKey } from "./entity/SignedCall.js"
import { adminKey } from "./entity/AdminCall.js"

export type ClusterRole = Exclude<Role, "embedded">

/** The cluster's timings and this process's runner address, as `@effect/cluster` takes them (never from its own env reading). */
const shardingConfig = (cluster: ClusterSettingsShape, holdsShards: boolean) =>
  ShardingConfig.layer({
    runnerAddress: holdsShards ? Option.map(cluster.runnerAddress, (a) => RunnerAddress.make(a.host, a.port)) : Option.none(),
    runnerListenAddress: Option.none(),
    shardsPerGroup: cluster.shards,
    shardLockExpiration: cluster.lockExpiration,
    // Refreshed well within the expiration, so a live runner never loses its shards.
    shardLockRefreshInterval: Duration.divide(cluster.lockExpiration, 3).pipe(Option.getOrElse(() => cluster.lockExpiration)),
    refreshAssignmentsInterval: cluster.refreshInterval,
    runnerHealthCheckInterval: cluster.healthInterval,
    entityMaxIdleTime: cluster.entityIdle
  })

/**
 * The cluster's storage creates its tables at startup with `CREATE … IF NOT EXISTS`, which PostgreSQL
 * does not serialize: processes starting together can collide on a new table's catalog row. The loser
 * tries again (the tables then exist).
 */
const tablesRace = Schedule.spaced(Duration.millis(250)).pipe(Schedule.intersect(Schedule.recurs(8)))
/** A storage layer built again after such a collision (its migrator reports it as a defect, so the whole cause is retried). */
const racedTables = <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  Layer.orDie(Layer.retry(Layer.catchAllCause(layer, (cause) => Layer.fail(Cause.squash(cause))), tablesRace))

/** `Sharding` for a runner (holds shards, serves other processes' calls) or a front (client only). */
export const shardingLayer = (cluster: ClusterSettingsShape, holdsShards: boolean) => {
  const transport = holdsShards
    ? SocketRunner.layer.pipe(
        Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))),
        Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol])
      )
    : SocketRunner.layerClientOnly.pipe(Layer.provide(NodeClusterSocket.layerClientProtocol))
  return transport.pipe(
    Layer.provide(racedTables(SqlMessageStorage.layer)),
    Layer.provide(racedTables(SqlRunnerStorage.layer)),
    Layer.provide(shardingConfig(cluster, holdsShards)),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
}

/**
 * The placement of `role`: the engine with the cluster's router, and on a runner the
 * database entities over that same engine (one `Databases`, one registry lock).
 */
export const placement = (role: ClusterRole, cluster: ClusterSettingsShape): Placement => (engine) => {
  const holdsShards = role === "runner"
  // One PostgreSQL client: the cluster's shard locks and messages, the archive's heads and its notifications.
  const pg = PgClient.layer({ url: cluster.databaseUrl })
  const key = callKey(cluster.secret)
  // The store: every acknowledged group shipped to the object store and fenced in PostgreSQL. One object
  // store for the archive, the followed copies and the files (S3, or a directory the processes share).
  const databases = databasesWith(PgArchive.layer)
  const followers = Followers.Default.pipe(Layer.provide([StoreConfigLive, OperationCatalogLive]))
  const router = ClusterRouter.layer({ timeout: cluster.sendTimeout, retryInterval: Duration.millis(100), key }).pipe(Layer.provide(followers))
  const placed = engine.pipe(Layer.provide(router), Layer.provideMerge(databases))
  const hosting = holdsShards
    ? DatabaseHost.layer({ maxIdleTime: cluster.entityIdle, key, adminKey: adminKey(cluster.secret) }).pipe(
        Layer.provide(placed),
        Layer.provide([StoreConfigLive, OperationCatalogLive])
      )
    : Layer.empty
  const assembled = Layer.merge(placed, hosting).pipe(
    Layer.provide(shardingLayer(cluster, holdsShards)),
    Layer.provide(ObjectStoreLive),
    Layer.provide(pg)
  )
  // What it still needs is the engine's own (settings, deployment, ...): TypeScript cannot follow the
  // chain of generic `Exclude`s above to `Placement`'s, so the layer is named as what it is.
  return assembled as unknown as Layer.Layer<DataPlane, unknown, Settings | Deployment | Exclude<typeof engine extends Layer.Layer<DataPlane, infer _E, infer R> ? R : never, DatabaseRouter | Databases>>
}

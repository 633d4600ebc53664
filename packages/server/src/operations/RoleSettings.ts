/**
 * The process's role (`CAIRN_ROLE`): `embedded` (the default: one process holds every
 * database, no PostgreSQL), or a cluster role: `runner` (holds shards: databases' writers run
 * here), `front` (holds none: forwards writes to the runners) or `replica` (the same process
 * kind as a front, named for what it is run for: reads and sync from followed copies). Cluster roles need the cluster's PostgreSQL, a shared
 * deployment secret (handles and links are sealed, and every process must open what another
 * sealed) and, for a runner, the address the others reach it at. Read with every other
 * setting at startup, so their problems are listed together. Only `Config` here: the cluster
 * code itself is loaded by the roles that use it.
 */
import { Config, ConfigError, Duration, Either, Option, Redacted } from "effect"

export type Role = "embedded" | "runner" | "front" | "replica"
export const roles: ReadonlyArray<Role> = ["embedded", "runner", "front", "replica"]

export interface ClusterSettingsShape {
  /** The cluster's PostgreSQL (`CAIRN_CLUSTER_DATABASE_URL`): shard locks, runners, messages. */
  readonly databaseUrl: Redacted.Redacted<string>
  /** The deployment secret (`CAIRN_SECRET`): what forwarded calls are signed with, and what seals handles and links. */
  readonly secret: Redacted.Redacted<string>
  /** Where the other processes reach this runner (`CAIRN_RUNNER_HOST`, `CAIRN_RUNNER_PORT`); none for a front. */
  readonly runnerAddress: Option.Option<{ readonly host: string; readonly port: number }>
  /** Shards per group (`CAIRN_CLUSTER_SHARDS`, default 300): the same on every process. */
  readonly shards: number
  /** A dead runner's shards are taken over after this (`CAIRN_CLUSTER_LOCK_EXPIRATION`, default 10 s). */
  readonly lockExpiration: Duration.Duration
  /** How often shard assignments are re-read (`CAIRN_CLUSTER_REFRESH_INTERVAL`, default 3 s). */
  readonly refreshInterval: Duration.Duration
  /** How often runners are checked for health (`CAIRN_CLUSTER_HEALTH_INTERVAL`, default 10 s). */
  readonly healthInterval: Duration.Duration
  /** A forwarded call's deadline, retries included (`CAIRN_CLUSTER_SEND_TIMEOUT`, default 10 s): then a retryable 503. */
  readonly sendTimeout: Duration.Duration
  /** An entity without calls is passivated after this (`CAIRN_CLUSTER_ENTITY_IDLE`, default 1 min). */
  readonly entityIdle: Duration.Duration
}

export interface RoleSettingsShape {
  readonly role: Role
  /** Present exactly in the cluster roles. */
  readonly cluster: Option.Option<ClusterSettingsShape>
}

const roleConfig = Config.literal(...roles)("CAIRN_ROLE").pipe(Config.withDefault("embedded" as const))

/**
 * A setting a cluster role cannot do without: absent in a cluster role, its own problem named
 * with the role (each setting checks on its own, so all their problems are listed together).
 */
const required = <A>(config: Config.Config<A>, name: string, what: string, needs: (role: Role) => boolean): Config.Config<Option.Option<A>> =>
  Config.all([roleConfig, Config.option(config)]).pipe(
    Config.mapOrFail(([role, value]) =>
      needs(role) && Option.isNone(value)
        ? Either.left(ConfigError.InvalidData([], `${name} is required for CAIRN_ROLE=${role} (${what})`))
        : Either.right(value)
    )
  )

const inCluster = (role: Role) => role !== "embedded"

const positiveDuration = (name: string, fallback: Duration.Duration) =>
  Config.duration(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `${name} must be a positive duration (e.g. "5 seconds")`, validation: (d) => Duration.greaterThan(d, Duration.zero) })
  )

export const roleSettingsConfig: Config.Config<RoleSettingsShape> = Config.all({
  role: roleConfig,
  databaseUrl: required(Config.redacted("CAIRN_CLUSTER_DATABASE_URL"), "CAIRN_CLUSTER_DATABASE_URL", "the cluster's PostgreSQL, postgres://…", inCluster),
  // Checked here for its presence in every cluster role; `DeploymentSecret` reads it for sealing.
  secret: required(
    Config.redacted("CAIRN_SECRET").pipe(
      Config.validate({ message: "CAIRN_SECRET must be at least 32 characters", validation: (s) => Redacted.value(s).length >= 32 })
    ),
    "CAIRN_SECRET",
    "32+ random characters, the same on every process: handles and links sealed by one process are opened by another",
    inCluster
  ),
  // The archive, the followed copies and the files live in the object store, which every process
  // reads: S3, or one directory they all share (never each data directory's own).
  sharedObjects: Config.all([
    roleConfig,
    Config.string("CAIRN_OBJECT_STORE").pipe(Config.withDefault("filesystem")),
    Config.option(Config.string("CAIRN_OBJECT_DIR"))
  ]).pipe(
    Config.mapOrFail(([role, store, dir]) =>
      inCluster(role) && store === "filesystem" && Option.isNone(dir)
        ? Either.left(
            ConfigError.InvalidData(
              [],
              `CAIRN_ROLE=${role} needs an object store every process shares: CAIRN_OBJECT_STORE=s3 (with CAIRN_S3_*), or CAIRN_OBJECT_DIR set to one directory all processes of this machine use`
            )
          )
        : Either.right(undefined)
    )
  ),
  runnerHost: Config.string("CAIRN_RUNNER_HOST").pipe(Config.withDefault("127.0.0.1")),
  runnerPort: required(
    Config.integer("CAIRN_RUNNER_PORT").pipe(
      Config.validate({ message: "CAIRN_RUNNER_PORT must be a TCP port between 1 and 65535", validation: (p) => p >= 1 && p <= 65535 })
    ),
    "CAIRN_RUNNER_PORT",
    "the port the other processes reach this runner at",
    (role) => role === "runner"
  ),
  shards: Config.integer("CAIRN_CLUSTER_SHARDS").pipe(
    Config.withDefault(300),
    Config.validate({ message: "CAIRN_CLUSTER_SHARDS must be a positive integer, the same on every process", validation: (n) => n > 0 })
  ),
  lockExpiration: positiveDuration("CAIRN_CLUSTER_LOCK_EXPIRATION", Duration.seconds(10)),
  refreshInterval: positiveDuration("CAIRN_CLUSTER_REFRESH_INTERVAL", Duration.seconds(3)),
  healthInterval: positiveDuration("CAIRN_CLUSTER_HEALTH_INTERVAL", Duration.seconds(10)),
  sendTimeout: positiveDuration("CAIRN_CLUSTER_SEND_TIMEOUT", Duration.seconds(10)),
  entityIdle: positiveDuration("CAIRN_CLUSTER_ENTITY_IDLE", Duration.minutes(1))
}).pipe(
  Config.map((raw): RoleSettingsShape => ({
    role: raw.role,
    cluster:
      raw.role === "embedded" || Option.isNone(raw.databaseUrl) || Option.isNone(raw.secret)
        ? Option.none()
        : Option.some({
            databaseUrl: raw.databaseUrl.value,
            secret: raw.secret.value,
            runnerAddress: raw.role === "runner" ? Option.map(raw.runnerPort, (port) => ({ host: raw.runnerHost, port })) : Option.none(),
            shards: raw.shards,
            lockExpiration: raw.lockExpiration,
            refreshInterval: raw.refreshInterval,
            healthInterval: raw.healthInterval,
            sendTimeout: raw.sendTimeout,
            entityIdle: raw.entityIdle
          })
  }))
)

/**
 * The operator's commands (`cairn <command>`, run by `cli.ts`): `serve` and `check` a deployment
 * (the tracker, or the module `--app` names), mint a development `token` for the running server,
 * generate typed `bindings`, `backup` databases online and `restore` one from backups (online through
 * the running server's operator listener, else offline), `doctor` a running deployment (list, check,
 * clear a fault); in a cluster (`CAIRN_ROLE` set), `restore` one database online from the archive and
 * `move` one (close it where it runs). A database is named by the claims a token carries
 * (`--database <value>`, `--db <name>` when the deployment has several database deployments).
 */
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { Command, Options, ValidationError } from "@effect/cli"
// Module subpaths: the package's barrel loads its HTTP client (undici) and cluster modules at startup.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect, Layer, Option } from "effect"
import { compile } from "@cairn/catalog/Catalog"
import { Deployment } from "@cairn/server/engine/Deployment"
import { ObjectStoreLive } from "@cairn/server/engine/ObjectStoreLive"
import { Settings } from "@cairn/server/operations/Settings"
import { allSettings } from "@cairn/server/Startup"
import { roles, roleSettingsConfig } from "@cairn/server/operations/RoleSettings"
import { Backup, DatabasePlans, MigrateApply, Position, Restore } from "@cairn/store"
import { Registry } from "@cairn/store/Registry"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { storeConfig } from "@cairn/store/StoreConfig"
import { exportName, invocationDirectory, loadDeployment } from "./AppModule.js"
import { generate } from "./BindingsGenerator.js"
import { databasePlans, deploymentProblems, settingsProblems } from "./Check.js"
import { serveDeployment } from "./Serve.js"
import { mintForRunningServer, splitRoles } from "./TokenCommand.js"
import { call, notRunning, runningServer, selectDatabase } from "./OperatorClient.js"
import type { ClearFaultResult, DatabaseListing, IntegrityResult, RestoreResult } from "@cairn/domain/DatabaseAdmin"

const repositoryRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
/** The tracker's checked-in bindings, `cairn bindings`' default output. */
const trackerBindings = join(repositoryRoot, "packages/client/src/generated/tracker.ts")

const app = Options.text("app").pipe(
  Options.withDescription(
    `a module (./path/to/app.ts or a package specifier) exporting \`${exportName}\`, a DeploymentDefinition; default: the tracker`
  ),
  Options.optional
)

/** The data directory the server uses (`CAIRN_DATA_DIR`, `./.cairn` by default) and its backup identity. */
const dataDirectory = Effect.gen(function* () {
  const { dataDir } = yield* storeConfig
  return { dataDir, deploymentId: yield* Backup.deploymentIdOf(dataDir) }
})

/**
 * The deployment's object store (`CAIRN_OBJECT_STORE`: its directory or its S3 bucket), for the files a
 * backup copies and a restore puts back.
 */
const withObjectStore = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, ObjectStoreLive.pipe(Layer.provide(Settings.layerConfig)))


/** `--database`: the key claim's value, as tokens carry it. */
const databaseValue = Options.text("database").pipe(
  Options.withAlias("org"),
  Options.withDescription("the database key claim's value, as tokens carry it (e.g. the org)")
)
/** `--db`: which database deployment, as a token's `cairn_db` claim names it (needed only when there are several). */
const databaseDeployment = Options.text("db").pipe(
  Options.withDescription("the database deployment, as a token's cairn_db claim names it (only when the deployment has several)"),
  Options.optional
)

/** The opaque id of the database a token with these claims acts on, in the deployment `--app` names. */
const idOfClaims = (app: Option.Option<string>, value: string, db: Option.Option<string>) =>
  Effect.flatMap(loadDeployment(app), ({ definition }) => selectDatabase(definition, value, db))

/** `--to` of restore: a position (`1234` or an opaque `c…` from a receipt) or an ISO time. */
const parseTarget = (text: string): Effect.Effect<Restore.Target, string> => {
  if (/^\d+$/.test(text)) return Effect.succeed({ position: Number(text) })
  const opaque = Position.decode(text)
  if (opaque !== undefined) return Effect.succeed({ position: opaque })
  if (!Number.isNaN(Date.parse(text))) return Effect.succeed({ time: new Date(text).toISOString() })
  return Effect.fail(`--to takes a commit position (e.g. 1234 or c0000ya) or a time (e.g. 2026-11-23T17:00:00Z), not "${text}"`)
}

const backup = Command.make(
  "backup",
  {
    database: databaseValue.pipe(Options.optional),
    db: databaseDeployment,
    app,
    all: Options.boolean("all").pipe(Options.withDescription("every database of the data directory")),
    to: Options.text("to").pipe(Options.withDescription("directory the backups and their manifests are written to"))
  },
  ({ all, app, database, db, to }) =>
    Effect.gen(function* () {
      const { dataDir, deploymentId } = yield* dataDirectory
      if (all === Option.isSome(database)) return yield* Effect.fail("pass exactly one of --database <key> and --all")
      const manifests = Option.isSome(database)
        ? [yield* withObjectStore(Backup.backupDatabase({ dataDir, deploymentId, databaseId: yield* idOfClaims(app, database.value, db), to }))]
        : yield* withObjectStore(Backup.backupAll({ dataDir, deploymentId, to }))
      for (const m of manifests) yield* Console.log(`backed up ${m.databaseId} at position ${m.position} to ${m.file}`)
      if (manifests.length === 0) yield* Console.log(`no databases in ${dataDir}`)
    })
).pipe(Command.withDescription("Back up one database, or all of them, while the server keeps serving."))

/**
 * The cluster settings when `CAIRN_ROLE` names a cluster role (the same settings as the servers): then
 * `restore` and `move` act online through the database's entity, never on local files.
 */
const clusterMode = Effect.map(roleSettingsConfig, ({ cluster, role }) => (role === "embedded" ? Option.none() : cluster))

/** The cluster's operator client, loaded only in a cluster role (the embedded CLI never loads `@effect/cluster`). */
const clusterAdmin = Effect.promise(() => import("@cairn/cluster/admin/ClusterAdmin"))

const restore = Command.make(
  "restore",
  {
    from: Options.text("from").pipe(Options.withDescription("directory holding the backups (embedded; a cluster restores from its archive)"), Options.optional),
    database: databaseValue,
    db: databaseDeployment,
    app,
    to: Options.text("to").pipe(
      Options.withDescription("a commit position or an ISO time; default: the newest backup (embedded); required in a cluster"),
      Options.optional
    ),
    log: Options.text("log").pipe(
      Options.withDescription("a later copy of the database's log to replay from; default: the data directory's file, else the newest backup"),
      Options.optional
    ),
    force: Options.boolean("force").pipe(
      Options.withDescription("offline (no server running): replace an existing database file (moved aside, not deleted); online it always is")
    )
  },
  ({ app, database, db, force, from, log, to }) =>
    Effect.gen(function* () {
      const cluster = yield* clusterMode
      if (Option.isSome(cluster)) {
        // Online, in the cluster: the database's entity rebuilds it from the archive while every other database serves.
        if (Option.isSome(from) || Option.isSome(log) || force) {
          return yield* Effect.fail("in a cluster (CAIRN_ROLE is set) restore reads the cluster's archive online: --from, --log and --force do not apply")
        }
        if (Option.isNone(to)) return yield* Effect.fail("in a cluster, --to is required: a commit position (e.g. 1234 or c0000ya) or a time (e.g. 2026-11-23T17:00:00Z)")
        const target = yield* parseTarget(to.value)
        const admin = yield* clusterAdmin
        const id = yield* idOfClaims(app, database, db)
        const done = yield* admin.restore(cluster.value, id, target).pipe(Effect.mapError((e) => e.message))
        return yield* Console.log(
          `restored ${id} online to position ${done.position} (it was at ${done.previousPosition}; history ${done.previousGeneration} → ${done.generation}) on runner ${done.runner}; it refused calls for ${done.unavailableMillis} ms`
        )
      }
      if (Option.isNone(from)) return yield* Effect.fail("--from <directory> is required: the backups to restore from")
      const { dataDir, deploymentId } = yield* dataDirectory
      const { definition } = yield* loadDeployment(app)
      const id = yield* selectDatabase(definition, database, db)
      const target = Option.isSome(to) ? yield* parseTarget(to.value) : undefined
      const server = runningServer(dataDir)
      if (Option.isSome(server)) {
        // Online: the running server holds this database (its calls answer a retryable 503), restores it, and takes calls again.
        const done = yield* call<RestoreResult>(server.value, "POST", "/admin/restore", {
          id,
          from: resolve(invocationDirectory(), from.value),
          ...(target !== undefined ? { to: target } : {}),
          ...(Option.isSome(log) ? { log: resolve(invocationDirectory(), log.value) } : {})
        })
        yield* Console.log(
          `restored ${done.id} online to position ${done.position} (backup at ${done.backupPosition}, ${done.replayed} commits replayed); its calls were refused (retryably) for ${done.unavailableMillis} ms, every other database kept serving`
        )
        if (done.replaced !== null) yield* Console.log(`the previous file was kept as ${done.replaced}`)
        return
      }
      const deployment = yield* Deployment.make(definition)
      const restored = yield* withObjectStore(Restore.restore({
        from: from.value,
        dataDir,
        databaseId: id,
        deploymentId,
        // The catalog exactly as the server installs it into a database.
        catalog: deployment.operations.catalog,
        to: target,
        log: Option.getOrUndefined(log),
        force
      }))
      yield* Console.log(
        `restored ${restored.manifest.databaseId} to position ${restored.position} (backup at ${restored.manifest.position}, ${restored.replayed} commits replayed)`
      )
      if (restored.replaced) yield* Console.log(`the previous file was kept as ${restored.replaced}`)
    })
).pipe(
  Command.withDescription(
    "Restore one database from backups, to the newest backup or to a position or time: online through the running server (its other databases keep serving), else offline; in a cluster (CAIRN_ROLE set), online from the archive to any position since its oldest kept snapshot."
  )
)

const move = Command.make(
  "move",
  { database: databaseValue, db: databaseDeployment, app },
  ({ app, database, db }) =>
    Effect.gen(function* () {
      const cluster = yield* clusterMode
      if (Option.isNone(cluster)) return yield* Effect.fail("move needs a cluster: set CAIRN_ROLE (e.g. front) and the cluster's settings, as the servers have them")
      const admin = yield* clusterAdmin
      const id = yield* idOfClaims(app, database, db)
      const done = yield* admin.close(cluster.value, id).pipe(Effect.mapError((e) => e.message))
      yield* Console.log(
        done.wasOpen
          ? `closed ${id} on runner ${done.runner} (every commit shipped); its next call opens it on the runner its shard is assigned to now`
          : `${id} was not open on runner ${done.runner}; its next call opens it on the runner its shard is assigned to now`
      )
    })
).pipe(
  Command.withDescription(
    "Cluster: close one database where it runs, cleanly, so that its next call opens it on its shard's current owner (placement is by shard: see the README)."
  )
)

const kib = (bytes: number | null) => (bytes === null ? "-" : `${Math.ceil(bytes / 1024)} KiB`)

const doctor = Command.make(
  "doctor",
  {
    app,
    database: databaseValue.pipe(Options.optional),
    db: databaseDeployment,
    clearFault: Options.boolean("clear-fault").pipe(
      Options.withDescription("forget the database's storage fault (its file repaired) and open it again: it serves without a restart")
    )
  },
  ({ app, clearFault, database, db }) =>
    Effect.gen(function* () {
      if (Option.isSome(yield* clusterMode)) {
        return yield* Effect.fail("doctor works on an embedded server (its operator listener); in a cluster (CAIRN_ROLE is set) a runner rebuilds a damaged database from the archive on its own, and cairn restore / cairn move act online")
      }
      const { dataDir } = yield* storeConfig
      const server = runningServer(dataDir)
      if (Option.isNone(server)) return yield* Effect.fail(notRunning(dataDir))
      const id = Option.isSome(database) ? yield* idOfClaims(app, database.value, db) : undefined
      if (clearFault) {
        if (id === undefined) return yield* Effect.fail("--clear-fault needs --database <value> (and --db <name> when the deployment has several)")
        const done = yield* call<ClearFaultResult>(server.value, "POST", "/admin/clear-fault", { id })
        yield* Console.log(
          `${id}: ${done.cleared === null ? "had no fault" : `fault (${done.cleared}) cleared`}; ${done.serving ? "it serves again" : `still refused: ${done.problem}`}`
        )
        if (!done.serving) yield* Effect.sync(() => (process.exitCode = 1))
        return
      }
      // One database at a time, each printed as it is checked (on a worker thread, never holding another database's calls).
      const { databases } = yield* call<{ readonly databases: ReadonlyArray<DatabaseListing> }>(server.value, "GET", "/admin/databases")
      const shown = databases.filter((d) => id === undefined || d.id === id)
      if (id !== undefined && shown.length === 0) return yield* Effect.fail(`no database ${id} in ${dataDir}`)
      let bad = 0
      for (const listed of shown) {
        const { results } = yield* call<{ readonly results: ReadonlyArray<IntegrityResult> }>(server.value, "POST", "/admin/check", { id: listed.id })
        const check = results[0]
        // A damaged file is faulted by the check itself.
        const d = check !== undefined && !check.ok && listed.state !== "held" ? { ...listed, state: "faulted" } : listed
        const integrity = check === undefined ? "not checked" : check.ok ? "integrity ok" : `integrity: ${check.problems.slice(0, 3).join("; ")}`
        if (d.fault !== null || (check !== undefined && !check.ok)) bad += 1
        yield* Console.log(
          `${d.id}  ${d.state}  position ${Math.max(d.position, check?.position ?? 0)}  file ${kib(d.fileBytes)}  objects ${kib(d.objectBytes)}  ${integrity}${d.fault !== null ? `  fault ${d.fault.kind}: ${d.fault.detail}` : ""}`
        )
      }
      yield* Console.log(
        bad === 0
          ? `${shown.length === 1 ? "1 database" : `${shown.length} databases`}: every one healthy`
          : `${bad} of ${shown.length} ${shown.length === 1 ? "database" : "databases"} faulted or damaged: repair the file and run cairn doctor --clear-fault --database <value>, or restore it online (cairn restore)`
      )
      if (bad > 0) yield* Effect.sync(() => (process.exitCode = 1))
    })
).pipe(
  Command.withDescription(
    "Against the running deployment (embedded; its operator listener, CAIRN_METRICS_PORT): check every database's integrity (or one), list each one's state and size, or clear a storage fault (--clear-fault) without stopping the server."
  )
)

const role = Options.choice("role", roles).pipe(
  Options.withDescription("embedded (default: one process, no PostgreSQL), runner (holds database shards), front (forwards to runners) or replica; overrides CAIRN_ROLE"),
  Options.optional
)

const serve = Command.make("serve", { app, role }, ({ app, role }) =>
  Effect.flatMap(loadDeployment(app), ({ definition }) => serveDeployment(definition, undefined, Option.isSome(role) ? { role: role.value } : {}))
).pipe(Command.withDescription("Serve a deployment (the tracker by default) until SIGINT or SIGTERM, as npm start does; --role picks the process's part in a cluster."))

const check = Command.make("check", { app }, ({ app }) =>
  Effect.gen(function* () {
    const { definition, name } = yield* loadDeployment(app)
    const planned = yield* databasePlans(definition)
    const problems = [...(yield* deploymentProblems(definition)), ...(yield* settingsProblems), ...planned.problems]
    if (problems.length > 0) {
      yield* Console.error(`${name} cannot be served; ${problems.length === 1 ? "1 problem" : `${problems.length} problems`}:\n${problems.map((p) => `  - ${p}`).join("\n")}`)
      return yield* Effect.sync(() => {
        process.exitCode = 1
      })
    }
    const deployment = yield* Deployment.make(definition)
    const [settings] = yield* allSettings
    yield* Console.log(
      `OK: ${name}: root schema "${deployment.catalog.name}", ${deployment.catalog.entities.length} entities, ${deployment.catalog.operations.length} operations, policy and handlers complete; settings valid (${settings.baseUrl}, stage ${settings.stageSetting}, data ${settings.dataDir}); catalog installs over ${planned.plans.length === 1 ? "1 database" : `${planned.plans.length} databases`}`
    )
  })
).pipe(Command.withDescription("Compile and validate a deployment and every setting without serving; list every problem (exit 1) or print one OK line."))

const migratePlan = Command.make("plan", { app }, ({ app }) =>
  Effect.gen(function* () {
    const { definition, name } = yield* loadDeployment(app)
    const deployment = yield* Deployment.make(definition)
    const { dataDir } = yield* storeConfig
    const plans = yield* DatabasePlans.planDirectory(dataDir, deployment.catalog)
    yield* Console.log(`change plan of ${name} over ${dataDir}:\n${DatabasePlans.render(plans)}`)
    const refused = DatabasePlans.problemsOfAll(plans)
    if (refused.length > 0) {
      yield* Console.error(`${refused.length === 1 ? "1 change is" : `${refused.length} changes are`} refused: the deployment cannot be served until a migration covers ${refused.length === 1 ? "it" : "them"} or the data satisfies ${refused.length === 1 ? "it" : "them"}`)
      return yield* Effect.sync(() => {
        process.exitCode = 1
      })
    }
  })
).pipe(Command.withDescription("Print the change plan of the deployment's catalog over every database: each change classified, offending row counts, migrations to run (no values)."))

/** `[#####·····] 3/10`: how far `apply` is through the databases. */
const bar = (done: number, total: number) => {
  const width = 20
  const filled = total === 0 ? width : Math.round((done / total) * width)
  return `[${"#".repeat(filled)}${"·".repeat(width - filled)}] ${done}/${total}`
}

const migrateApply = Command.make("apply", { app }, ({ app }) =>
  Effect.gen(function* () {
    const { definition, name } = yield* loadDeployment(app)
    const deployment = yield* Deployment.make(definition)
    const config = yield* storeConfig
    yield* Console.log(`applying ${name}'s catalog and migrations to every database of ${config.dataDir}`)
    const results = yield* MigrateApply.applyAll({
      operations: deployment.operations,
      onDatabase: (i, total, id) => Console.log(`${bar(i, total)} database ${id}`),
      onBatch: (_id, b) => Console.log(`    migration "${b.migration}": batch ${b.batch} committed at position ${b.position}${b.state === "done" ? " (finished)" : ""}`)
    }).pipe(Effect.provide(Registry.Default), Effect.provide(StoreConfig.layer(config)))
    yield* Console.log(bar(results.length, results.length))
    const count = (outcome: MigrateApply.Applied["outcome"]) => results.filter((r) => r.outcome === outcome).length
    const batches = results.reduce((n, r) => n + r.batches, 0)
    yield* Console.log(
      `summary: ${results.length} ${results.length === 1 ? "database" : "databases"}: ${count("updated")} updated, ${count("unchanged")} unchanged, ${count("refused")} refused, ${count("failed")} failed; ${batches} migration ${batches === 1 ? "batch" : "batches"} committed`
    )
    const bad = results.filter((r) => r.outcome === "refused" || r.outcome === "failed")
    if (bad.length > 0) {
      yield* Console.error(bad.map((r) => `database ${r.databaseId}: ${r.outcome}: ${r.message ?? ""}`).join("\n"))
      return yield* Effect.sync(() => {
        process.exitCode = 1
      })
    }
  })
).pipe(
  Command.withDescription(
    "Install the deployment's catalog and run pending migrations on every database now (the server stopped), with progress and a summary; activation would otherwise do it lazily."
  )
)

const migrate = Command.make("migrate").pipe(
  Command.withDescription("Plan and apply catalog changes and migrations over every database."),
  Command.withSubcommands([migratePlan, migrateApply])
)

const token = Command.make(
  "token",
  {
    sub: Options.text("sub").pipe(Options.withDescription("the token's subject")),
    org: Options.text("org").pipe(Options.withDescription("the database key claim: selects the database")),
    roles: Options.text("roles").pipe(Options.withDescription("roles, space or comma separated (e.g. admin); may repeat"), Options.repeated),
    scope: Options.text("scope").pipe(Options.withDescription('space-separated scopes; default "cairn:read cairn:write"'), Options.optional),
    resource: Options.choice("resource", ["db", "mcp"]).pipe(Options.withDescription("the audience: {base}/db or {base}/mcp"), Options.withDefault("db" as const)),
    ttl: Options.integer("ttl").pipe(Options.withDescription("lifetime in seconds (at most 30 days)"), Options.withDefault(3600)),
    base: Options.text("base").pipe(Options.withDescription("the base URL you expect the server at; refused if the running server's differs"), Options.optional)
  },
  (options) =>
    Effect.gen(function* () {
      const minted = mintForRunningServer(
        { ...options, roles: splitRoles(options.roles), scope: Option.getOrUndefined(options.scope), base: Option.getOrUndefined(options.base) },
        process.env
      )
      if (minted._tag === "Refused") return yield* Effect.fail(`token: ${minted.message}`)
      yield* Console.log(minted.token)
    })
).pipe(
  Command.withDescription(
    "Print a development access token for the server running on CAIRN_DATA_DIR (its issuer, key and base URL from <dataDir>/dev-issuer)."
  )
)

const bindings = Command.make(
  "bindings",
  {
    app,
    out: Options.text("out").pipe(
      Options.withDescription("file to write (or compare); default: packages/client/src/generated/tracker.ts for the tracker, stdout for --app"),
      Options.optional
    ),
    check: Options.boolean("check").pipe(Options.withDescription("compare with --out instead of writing; exit 1 when it is stale"))
  },
  ({ app, check, out }) =>
    Effect.gen(function* () {
      const { definition } = yield* loadDeployment(app)
      const catalog = yield* compile(definition.root)
      const file = Option.isSome(out) ? resolve(invocationDirectory(), out.value) : Option.isNone(app) ? trackerBindings : undefined
      // Inside the client package the module imports its sibling; anywhere else, the package.
      const bindingsModule = file !== undefined && dirname(file) === dirname(trackerBindings) ? "../Bindings.js" : "@cairn/client/Bindings"
      const source = yield* Effect.try({ try: () => generate(catalog, { bindingsModule }), catch: (e) => (e instanceof Error ? e.message : String(e)) })
      if (file === undefined) {
        if (check) return yield* Effect.fail("--check needs --out <file> with --app")
        return yield* Effect.sync(() => process.stdout.write(source))
      }
      if (check) {
        const current = yield* Effect.orElseSucceed(Effect.try(() => readFileSync(file, "utf8")), () => "")
        if (current !== source) return yield* Effect.fail(`${file} is stale: run \`npm run bindings\` (or cairn bindings) and commit the result.`)
        return yield* Console.log(`${file} is up to date`)
      }
      yield* Effect.try({ try: () => writeFileSync(file, source), catch: (e) => `cannot write ${file}: ${e instanceof Error ? e.message : String(e)}` })
      yield* Console.log(`wrote ${file}`)
    })
).pipe(Command.withDescription("Generate typed client bindings for a deployment's catalog (the tracker by default)."))

const cairn = Command.make("cairn").pipe(
  Command.withDescription("Cairn's operator commands."),
  Command.withSubcommands([serve, check, migrate, token, bindings, backup, restore, doctor, move])
)

const run = Command.run(cairn, { name: "cairn", version: "0.1.0" })

/** Runs `cairn` over `argv` (`process.argv`, node and script first) until it is done or interrupted. */
export const runCli = (argv: ReadonlyArray<string>) => run(argv).pipe(
  // An operator's mistake or a refusal is one line on stderr and exit status 1, not a stack trace.
  // (@effect/cli has already printed a usage error with the help.)
  Effect.catchAll((error) =>
    Effect.zipRight(
      ValidationError.isValidationError(error)
        ? Effect.void
        : Console.error(typeof error === "string" ? error : "message" in error ? error.message : String(error)),
      Effect.sync(() => {
        process.exitCode = 1
      })
    )
  ),
  Effect.provide(NodeContext.layer),
  // `serve` installs the operator's logger (CAIRN_LOG_FORMAT) itself.
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)

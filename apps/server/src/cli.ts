/**
 * The operator's command line for the tracker deployment (`npm run cairn -- <command>`):
 * `backup` copies databases online, while the server runs; `restore` rebuilds one
 * database from backups, to the newest backup or to a position or time.
 */
import { Command, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Option, Schema } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Deployment } from "@cairn/server/Deployment"
import { Backup, Position, Restore } from "@cairn/store"
import { databaseId } from "@cairn/store/Databases"
import { storeConfig } from "@cairn/store/StoreConfig"
import { trackerDeployment } from "@cairn/tracker/application"

/** The data directory the server uses (`CAIRN_DATA_DIR`, `./.cairn` by default) and its backup identity. */
const dataDirectory = Effect.gen(function* () {
  const { dataDir } = yield* storeConfig
  return { dataDir, deploymentId: yield* Backup.deploymentIdOf(dataDir) }
})

const idOfKey = (key: string) => Effect.map(Schema.decode(DatabaseKey)(key), databaseId)

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
    database: Options.text("database").pipe(Options.withDescription("the database key (e.g. the org)"), Options.optional),
    all: Options.boolean("all").pipe(Options.withDescription("every database of the data directory")),
    to: Options.text("to").pipe(Options.withDescription("directory the backups and their manifests are written to"))
  },
  ({ all, database, to }) =>
    Effect.gen(function* () {
      const { dataDir, deploymentId } = yield* dataDirectory
      if (all === Option.isSome(database)) return yield* Effect.fail("pass exactly one of --database <key> and --all")
      const manifests = Option.isSome(database)
        ? [yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: yield* idOfKey(database.value), to })]
        : yield* Backup.backupAll({ dataDir, deploymentId, to })
      for (const m of manifests) yield* Console.log(`backed up ${m.databaseId} at position ${m.position} to ${m.file}`)
      if (manifests.length === 0) yield* Console.log(`no databases in ${dataDir}`)
    })
).pipe(Command.withDescription("Back up one database, or all of them, while the server keeps serving."))

const restore = Command.make(
  "restore",
  {
    from: Options.text("from").pipe(Options.withDescription("directory holding the backups")),
    database: Options.text("database").pipe(Options.withDescription("the database key (e.g. the org)")),
    to: Options.text("to").pipe(Options.withDescription("a commit position or an ISO time; default: the newest backup"), Options.optional),
    log: Options.text("log").pipe(
      Options.withDescription("a later copy of the database's log to replay from; default: the data directory's file, else the newest backup"),
      Options.optional
    ),
    force: Options.boolean("force").pipe(Options.withDescription("replace an existing database file (moved aside, not deleted); stop the server first"))
  },
  ({ database, force, from, log, to }) =>
    Effect.gen(function* () {
      const { dataDir, deploymentId } = yield* dataDirectory
      const deployment = yield* Deployment.make(trackerDeployment)
      const restored = yield* Restore.restore({
        from,
        dataDir,
        databaseId: yield* idOfKey(database),
        deploymentId,
        // The catalog exactly as the server installs it into a database.
        catalog: deployment.operations.catalog,
        to: Option.isSome(to) ? yield* parseTarget(to.value) : undefined,
        log: Option.getOrUndefined(log),
        force
      })
      yield* Console.log(
        `restored ${restored.manifest.databaseId} to position ${restored.position} (backup at ${restored.manifest.position}, ${restored.replayed} commits replayed)`
      )
      if (restored.replaced) yield* Console.log(`the previous file was kept as ${restored.replaced}`)
    })
).pipe(Command.withDescription("Restore one database from backups, to the newest backup or to a position or time."))

const cairn = Command.make("cairn").pipe(Command.withSubcommands([backup, restore]))

const run = Command.run(cairn, { name: "cairn", version: "0.1.0" })

run(process.argv).pipe(
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
  NodeRuntime.runMain
)

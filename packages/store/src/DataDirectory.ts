/**
 * The data directory knows it was used: an identity, written at its first start into the registry
 * and then into an identity file beside it (`directory-id`), and stamped into every database file
 * (see `OpenDatabase`). Checked at every start of the store, before any database opens: a directory
 * whose identity file survives while its registry is gone or empty (or is another directory's)
 * refuses to start, because it would answer every tenant as new and decide their old invocation
 * ids again. The operator restores the registry and database files from a backup (or `cairn restore`
 * each database, which registers it), or says so explicitly (`CAIRN_ACCEPT_LOST_REGISTRY=true`).
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Data, Effect, Schema } from "effect"
import { writeAtomically } from "./internal/files.js"
import { Registry } from "./Registry.js"
import { StoreConfig } from "./StoreConfig.js"

/** The identity file's name, beside `registry.sqlite`. */
export const identityFile = "directory-id"

/** Startup failure: the data directory was used, and its registry is not the one that used it. */
export class DataDirectoryRefused extends Data.TaggedError("DataDirectoryRefused")<{
  readonly directory: string
  readonly reason: "registry_lost" | "registry_foreign"
}> {
  override get message(): string {
    const what =
      this.reason === "registry_lost"
        ? `the data directory ${this.directory} was used before (its ${identityFile} file is there) but its registry.sqlite is missing or empty`
        : `the registry.sqlite in ${this.directory} belongs to another data directory (its identity differs from the ${identityFile} file)`
    return `${what}: starting would answer every tenant as new and apply their old invocation ids again. Restore registry.sqlite and databases/ together from a backup (or run cairn restore for each database), or set CAIRN_ACCEPT_LOST_REGISTRY=true to start anyway with what is there (tenants without a database file start empty, their past invocations forgotten).`
  }
}

const IdentityJson = Schema.parseJson(Schema.Struct({ directory: Schema.String, createdAt: Schema.String }))

/** The identity file's directory id, if the file is there (a file that does not decode is a defect: the operator's to look at). */
const readIdentity = (directory: string): string | undefined => {
  const path = join(directory, identityFile)
  if (!existsSync(path)) return undefined
  return Schema.decodeUnknownSync(IdentityJson)(readFileSync(path, "utf8")).directory
}

/** Writes the identity file atomically and durably (a temporary file, fsynced, renamed, the directory fsynced). */
const writeIdentity = (directory: string, id: string) =>
  writeAtomically(join(directory, identityFile), JSON.stringify({ directory: id, createdAt: new Date().toISOString() }) + "\n")

/**
 * Checks (and on a first start, gives) the data directory's identity; fails with
 * `DataDirectoryRefused` when the directory was used and its registry is lost or another's.
 * Answers the identity.
 */
export const verify: Effect.Effect<string, DataDirectoryRefused, Registry | StoreConfig> = Effect.gen(function* () {
  const registry = yield* Registry
  const { acceptLostRegistry } = yield* StoreConfig
  const directory = registry.directory
  const recorded = yield* registry.directoryId
  const file = yield* Effect.orDie(Effect.try(() => readIdentity(directory)))
  if (file === undefined) {
    // A first start (or a directory from before identities): the registry first, then the file, so a
    // file on disk always means a registry that had the identity.
    const id = recorded ?? crypto.randomUUID()
    if (recorded === undefined) yield* registry.identify(id)
    yield* Effect.orDie(Effect.try(() => writeIdentity(directory, id)))
    return id
  }
  // The same registry, unless emptied of its databases (its identity kept): that is a lost one too.
  const emptied = recorded === file && (yield* registry.registered) === 0 && (yield* registry.registeredEver) > 0
  if (recorded === file && !emptied) return file
  if (recorded === undefined && (yield* registry.registered) > 0) {
    // A registry rebuilt by `cairn restore` (it registers what it restores): this directory's again.
    yield* registry.identify(file)
    return file
  }
  const refused = new DataDirectoryRefused({ directory, reason: recorded === undefined || emptied ? "registry_lost" : "registry_foreign" })
  if (!acceptLostRegistry) return yield* refused
  yield* Effect.logWarning("starting on a data directory whose registry was lost, as CAIRN_ACCEPT_LOST_REGISTRY says", refused.message)
  const id = recorded ?? file
  // Recorded anew (the databases there now are all it had), then the file.
  yield* registry.identify(id)
  if (id !== file) yield* Effect.orDie(Effect.try(() => writeIdentity(directory, id)))
  return id
})

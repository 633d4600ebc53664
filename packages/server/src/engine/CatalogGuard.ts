/**
 * Startup's change-plan gate: before anything binds, the deployment's catalog is planned over
 * every database of the data directory (`DatabasePlans`). When any database would be
 * reinterpreted (an uncovered incompatible change, or a change whose validation finds stored
 * rows violating it), startup fails listing every problem of every database: never a healthy
 * start followed by per-request failures.
 */
import { Data, Effect, Layer } from "effect"
import { DatabasePlans } from "@cairn/store"
import { storeConfig } from "@cairn/store/StoreConfig"
import { Deployment } from "./Deployment.js"

/** Operator-facing: the catalog would reinterpret stored data; `problems` names each database and change. */
export class CatalogRefused extends Data.TaggedError("CatalogRefused")<{ readonly problems: ReadonlyArray<string> }> {
  override get message(): string {
    return `the catalog cannot be installed over the stored data (${this.problems.length} ${this.problems.length === 1 ? "problem" : "problems"}); nothing was changed. Run \`cairn migrate plan\` for the whole plan:\n${this.problems.map((p) => `  - ${p}`).join("\n")}`
  }
}

/** The refused changes of the deployment's catalog over every database of the data directory. */
export const refusedChanges = Effect.gen(function* () {
  const { catalog } = yield* Deployment
  const { dataDir } = yield* Effect.orDie(storeConfig)
  const plans = yield* DatabasePlans.planDirectory(dataDir, catalog)
  // A damaged file is that database's storage fault (refused on activation), not the deployment's.
  for (const plan of plans) {
    if (plan.unreadable !== undefined) {
      yield* Effect.logWarning("database file unreadable; not planned").pipe(Effect.annotateLogs({ database: plan.databaseId }))
    }
  }
  return DatabasePlans.problemsOfAll(plans)
})

/** Fails startup with `CatalogRefused` when any database would be reinterpreted. */
export const CatalogGuardLive = Layer.effectDiscard(
  Effect.flatMap(refusedChanges, (problems) => (problems.length > 0 ? Effect.fail(new CatalogRefused({ problems })) : Effect.void))
)

/**
 * `cairn check`: everything that would stop a deployment from starting, found without serving
 * it. Definitions, policy and handlers are checked independently, so a policy problem does not
 * hide a missing handler; every setting is read as `launch` reads it, a public deployment
 * is judged by the same exposure guard that would refuse to bind it, and the catalog is
 * planned over every database of the data directory as startup plans it.
 */
import { Cause, Effect, Exit } from "effect"
import { compile } from "@cairn/catalog/Catalog"
import { Policy } from "@cairn/policy"
import { Deployment, type DeploymentDefinition, type DeploymentError } from "@cairn/server/engine/Deployment"
import { exposureGuard } from "@cairn/server/auth/ExposureGuard"
import { Settings } from "@cairn/server/operations/Settings"
import { allSettings, describeConfigError } from "@cairn/server/Startup"
import { DatabasePlans } from "@cairn/store"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { storeConfig } from "@cairn/store/StoreConfig"

const linesOf = (error: DeploymentError): ReadonlyArray<string> => {
  switch (error._tag) {
    case "CatalogError":
      return error.problems.map((p) => `catalog: ${p}`)
    case "PolicyError":
      return error.problems.map((p) => `policy: ${p}`)
    case "OperationCatalogError":
      return [
        ...error.missing.map((k) => `handlers: operation "${k}" has no handler`),
        ...error.extra.map((k) => `handlers: handler "${k}" names no operation of the catalog`)
      ]
  }
}

/** One line per problem of `effect`'s failure; a defect (a definition that throws) is a problem too. */
const problemsOf = <A>(effect: Effect.Effect<A, DeploymentError>) =>
  Effect.map(Effect.exit(Effect.suspend(() => effect)), (exit): ReadonlyArray<string> => {
    if (Exit.isSuccess(exit)) return []
    const failures = [...Cause.failures(exit.cause)].flatMap(linesOf)
    const defects = [...Cause.defects(exit.cause)].map((d) => `definition: ${d instanceof Error ? d.message : String(d)}`)
    return [...failures, ...defects]
  })

/** Every problem of the definition, catalog, policy and handlers. */
export const deploymentProblems = (definition: DeploymentDefinition): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const whole = yield* problemsOf(Deployment.make(definition))
    if (whole.length === 0) return []
    // `Deployment.make` stops at the first failing stage; run the independent ones to report them all.
    const catalog = yield* Effect.either(Effect.suspend(() => compile(definition.root)))
    const parts =
      catalog._tag === "Right"
        ? [
            ...(yield* problemsOf(Policy.compile(catalog.right, definition.policy))),
            ...(yield* problemsOf(OperationCatalog.make(catalog.right, definition.handlers)))
          ]
        : []
    return [...whole, ...parts].filter((line, i, all) => all.indexOf(line) === i)
  })

/** Every settings problem, as `launch` would list them, then the exposure guard's refusal of a public deployment. */
export const settingsProblems: Effect.Effect<ReadonlyArray<string>> = Effect.gen(function* () {
  const checked = yield* Effect.either(allSettings)
  if (checked._tag === "Left") return describeConfigError(checked.left).map((l) => `settings: ${l}`)
  const exposure = yield* Effect.either(Effect.provideService(exposureGuard, Settings, checked.right[0]))
  if (exposure._tag === "Left") {
    const error = exposure.left
    return [`exposure: ${error._tag === "ExposureRefused" ? error.message : describeConfigError(error).join("; ")}`]
  }
  return []
})

/**
 * The change plan of the deployment's catalog over every database of the data directory
 * (`CAIRN_DATA_DIR`): the plans, and one line per refused change. A deployment that does not
 * compile has no plan (its problems are listed by `deploymentProblems`).
 */
export const databasePlans = (definition: DeploymentDefinition) =>
  Effect.gen(function* () {
    const deployment = yield* Effect.either(Effect.suspend(() => Deployment.make(definition)))
    if (deployment._tag === "Left") return { plans: [], problems: [] }
    const config = yield* Effect.either(storeConfig)
    if (config._tag === "Left") return { plans: [], problems: [] }
    const plans = yield* DatabasePlans.planDirectory(config.right.dataDir, deployment.right.catalog)
    return { plans, problems: DatabasePlans.problemsOfAll(plans).map((p) => `catalog change: ${p}`) }
  })

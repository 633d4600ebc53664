/**
 * The explicit deployment the application's entry point assembles: a named root
 * schema, its policy and operation handlers, and the database deployments that use it
 * (how a verified identity maps to a database). Compiled and validated before anything
 * is served: a definition, policy or handler problem stops startup with every problem listed.
 */
import { Context, Effect, Layer } from "effect"
import { type RootSchema } from "@cairn/catalog"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { CatalogError } from "@cairn/catalog/CatalogError"
import { Policy } from "@cairn/policy"
import { type PolicyError } from "@cairn/policy/PolicyError"
import { type Handlers } from "@cairn/store"
import { OperationCatalog, type OperationCatalogError, type OperationCatalogShape } from "@cairn/store/OperationCatalog"

/** How the databases of one deployment are derived from verified identities. */
export interface DatabaseDeployment {
  /** Operator-facing name of this set of databases (never public). */
  readonly name: string
  /** The root schema these databases hold; must name the deployment's root schema. */
  readonly schema: string
  /** The verified token claim whose value is the database key, e.g. `org`. */
  readonly keyClaim: string
}

export interface DeploymentDefinition {
  readonly root: RootSchema.RootSchema
  /** Who may see and do what; compiled against the root schema. */
  readonly policy: Policy.PolicyDefinition
  /** Exactly one handler per operation of the root schema. */
  readonly handlers: Handlers.Handlers
  readonly databases: ReadonlyArray<DatabaseDeployment>
}

export interface DeploymentShape {
  readonly root: RootSchema.RootSchema
  /** The compiled catalog; its token covers the policy too (`policy.catalog`). */
  readonly catalog: Catalog
  readonly policy: Policy.CompiledPolicy
  /** The catalog's operations with their handlers, for the writer. */
  readonly operations: OperationCatalogShape
  readonly database: DatabaseDeployment
  /** Definitions no policy rule names: hidden from every caller, admins included (logged at startup). */
  readonly invisible: Invisible
}

/** Entity names and operation keys (`Owner.name`) of the root schema that no policy rule names. */
export interface Invisible {
  readonly entities: ReadonlyArray<string>
  readonly operations: ReadonlyArray<string>
}

/**
 * What a policy leaves visible to no one: an entity without `Policy.entity` or an operation
 * without `Policy.operation` is hidden from everyone, which is safe but easy to miss.
 */
export const invisibleDefinitions = (root: RootSchema.RootSchema, policy: Policy.PolicyDefinition): Invisible => {
  const entities = new Set(policy.entities.map((e) => e.entity))
  const operations = new Set(policy.operations.map((o) => `${o.owner}.${o.name}`))
  return {
    entities: root.entities.map((e) => e.name).filter((name) => !entities.has(name)),
    operations: root.operations.map((o) => `${o.owner}.${o.name}`).filter((key) => !operations.has(key))
  }
}

/** The startup warning for `invisible`, naming every definition, or nothing when all have rules. */
export const invisibleWarning = (invisible: Invisible): string | undefined => {
  const { entities, operations } = invisible
  if (entities.length + operations.length === 0) return undefined
  const named = (one: string, many: string, names: ReadonlyArray<string>) =>
    names.length === 0 ? [] : [`${names.length === 1 ? one : many} ${names.join(", ")}`]
  const parts = [...named("entity", "entities", entities), ...named("operation", "operations", operations)]
  const verb = entities.length + operations.length === 1 ? "is" : "are"
  return `Policy: ${parts.join(" and ")} ${verb} visible to no one; add Policy.entity/Policy.operation rules`
}

export type DeploymentError = CatalogError | PolicyError | OperationCatalogError

export class Deployment extends Context.Tag("@cairn/server/Deployment")<Deployment, DeploymentShape>() {
  /** Compiles and validates a deployment definition. */
  static readonly make = (definition: DeploymentDefinition): Effect.Effect<DeploymentShape, DeploymentError> =>
    Effect.gen(function* () {
      const policy = yield* Policy.compile(yield* compile(definition.root), definition.policy)
      const catalog = policy.catalog
      const problems: Array<string> = []
      if (definition.databases.length !== 1) {
        problems.push(`deployment: exactly one database deployment is supported, ${definition.databases.length} given`)
      }
      for (const db of definition.databases) {
        if (db.schema !== definition.root.name) {
          problems.push(`database deployment "${db.name}": uses schema "${db.schema}", but the root schema is "${definition.root.name}"`)
        }
        if (!/^[A-Za-z_][A-Za-z0-9_:./-]*$/.test(db.keyClaim)) {
          problems.push(`database deployment "${db.name}": invalid key claim "${db.keyClaim}"`)
        }
      }
      if (problems.length > 0) return yield* new CatalogError({ problems })
      const operations = yield* OperationCatalog.make(catalog, definition.handlers)
      const invisible = invisibleDefinitions(definition.root, definition.policy)
      return { root: definition.root, catalog, policy, operations, database: definition.databases[0]!, invisible }
    })

  /** Compiles the deployment at startup and warns, once, about definitions visible to no one. */
  static readonly layer = (definition: DeploymentDefinition) =>
    Layer.effect(
      Deployment,
      Effect.tap(Deployment.make(definition), (deployment) => {
        const warning = invisibleWarning(deployment.invisible)
        return warning === undefined ? Effect.void : Effect.logWarning(warning)
      })
    )
}

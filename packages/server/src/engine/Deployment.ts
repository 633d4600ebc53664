/**
 * The explicit deployment the application's entry point assembles: a named root
 * schema, its policy and operation handlers, and the database deployments that use it
 * (how a verified identity maps to a database). Compiled and validated before anything
 * is served: a definition, policy or handler problem stops startup with every problem listed.
 *
 * Selection rule (spec rule 5: only verified identity picks a database). With one database
 * deployment, every token is for it. With several, the token names one by the verified
 * claim `selectorClaim` (default `cairn_db`) whose value is a database deployment's name;
 * a token naming none, an unknown one or several is refused (401). The chosen deployment's
 * `keyClaim` then gives the database key, namespaced by the deployment's name.
 */
import { Context, Effect, Layer } from "effect"
import { DatabaseKey } from "@cairn/domain/Ids"
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
  /**
   * Keys are the bare claim value, as before keys were namespaced by database deployment,
   * so a data directory written then stays readable (the tracker's `tenants`). At most one
   * database deployment of a deployment may say so; every other one is namespaced.
   */
  readonly legacyKeys?: boolean
}

/** The claim naming the database deployment when there are several. */
export const defaultSelectorClaim = "cairn_db"

/**
 * The database key of the claim value `value` in `database`: `\0<name>\0<value>`, or the
 * bare value for `legacyKeys`. Identity refuses control characters in a key claim, so a
 * bare key never starts with NUL and two database deployments' keys never collide.
 */
export const databaseKeyOf = (database: Pick<DatabaseDeployment, "name" | "legacyKeys">, value: string): DatabaseKey =>
  DatabaseKey.make(database.legacyKeys === true ? value : `\u0000${database.name}\u0000${value}`)

const CLAIM = /^[A-Za-z_][A-Za-z0-9_:./-]*$/
const NAME = /^[a-z][a-z0-9-]{0,62}$/

export interface DeploymentDefinition {
  readonly root: RootSchema.RootSchema
  /** Who may see and do what; compiled against the root schema. */
  readonly policy: Policy.PolicyDefinition
  /** Exactly one handler per operation of the root schema. */
  readonly handlers: Handlers.Handlers
  /** One or more; each maps verified claims to its own databases. */
  readonly databases: ReadonlyArray<DatabaseDeployment>
  /** The verified claim that names the database deployment when there are several; default `cairn_db`. */
  readonly selectorClaim?: string
}

export interface DeploymentShape {
  readonly root: RootSchema.RootSchema
  /** The compiled catalog; its token covers the policy too (`policy.catalog`). */
  readonly catalog: Catalog
  readonly policy: Policy.CompiledPolicy
  /** The catalog's operations with their handlers, for the writer. */
  readonly operations: OperationCatalogShape
  /** Every database deployment, names unique, in the definition's order. */
  readonly databases: ReadonlyArray<DatabaseDeployment>
  readonly selectorClaim: string
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
      const selectorClaim = definition.selectorClaim ?? defaultSelectorClaim
      if (definition.databases.length === 0) problems.push("deployment: name at least one database deployment")
      if (!CLAIM.test(selectorClaim)) problems.push(`deployment: invalid selector claim "${selectorClaim}"`)
      const names = new Set<string>()
      for (const db of definition.databases) {
        if (!NAME.test(db.name)) problems.push(`database deployment "${db.name}": a name is lower-case letters, digits and "-", starting with a letter`)
        if (names.has(db.name)) problems.push(`database deployment "${db.name}": named twice`)
        names.add(db.name)
        if (db.schema !== definition.root.name) {
          problems.push(`database deployment "${db.name}": uses schema "${db.schema}", but the root schema is "${definition.root.name}"`)
        }
        if (!CLAIM.test(db.keyClaim)) {
          problems.push(`database deployment "${db.name}": invalid key claim "${db.keyClaim}"`)
        }
        if (definition.databases.length > 1 && db.keyClaim === selectorClaim) {
          problems.push(`database deployment "${db.name}": its key claim "${db.keyClaim}" is the selector claim`)
        }
      }
      if (definition.databases.filter((db) => db.legacyKeys === true).length > 1) {
        problems.push("deployment: at most one database deployment may use legacy (unnamespaced) keys")
      }
      if (problems.length > 0) return yield* new CatalogError({ problems })
      const operations = yield* OperationCatalog.make(catalog, definition.handlers)
      return { root: definition.root, catalog, policy, operations, databases: definition.databases, selectorClaim, invisible: invisibleDefinitions(definition.root, definition.policy) }
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

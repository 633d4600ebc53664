/**
 * The explicit deployment the application's entry point assembles: a named root
 * schema, the database deployments that use it (how a verified identity maps to a
 * database), and the compiled catalog. Validated before anything is served.
 */
import { Context, Effect, Layer } from "effect"
import { type Catalog, compile, type RootSchema } from "@cairn/catalog"
import { CatalogError } from "@cairn/catalog"

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
  readonly databases: ReadonlyArray<DatabaseDeployment>
}

export interface DeploymentShape {
  readonly root: RootSchema.RootSchema
  readonly catalog: Catalog
  readonly database: DatabaseDeployment
}

export class Deployment extends Context.Tag("@cairn/server/Deployment")<Deployment, DeploymentShape>() {
  /** Compiles and validates a deployment definition. */
  static readonly make = (definition: DeploymentDefinition): Effect.Effect<DeploymentShape, CatalogError> =>
    Effect.gen(function* () {
      const catalog = yield* compile(definition.root)
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
      return { root: definition.root, catalog, database: definition.databases[0]! }
    })

  static readonly layer = (definition: DeploymentDefinition) => Layer.effect(Deployment, Deployment.make(definition))
}

/**
 * The application a command works on: the tracker by default, or the `deployment` export of
 * a module named by `--app` (a path such as `./my-app.ts`, or a package specifier), checked to
 * have the shape of a `DeploymentDefinition` before anything compiles it.
 */
import { isAbsolute, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { Data, Effect, Option } from "effect"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"

/** The name of the export `--app` modules provide. */
export const exportName = "deployment"

/** `--app` names no module, or the module exports no deployment. */
export class AppModuleError extends Data.TaggedError("AppModuleError")<{ readonly message: string }> {}

export interface Loaded {
  /** What the operator named (`tracker` by default), for messages. */
  readonly name: string
  readonly definition: DeploymentDefinition
}

/** Where relative paths start: the directory `npm run` was started from, else the process's. */
export const invocationDirectory = (): string => process.env.INIT_CWD ?? process.cwd()

const isPath = (spec: string) => spec.startsWith(".") || isAbsolute(spec) || /\.[cm]?[jt]s$/.test(spec)

const missing = (definition: Record<string, unknown>) =>
  (["root", "policy", "handlers", "databases"] as const).filter((k) => definition[k] === undefined || definition[k] === null)

/** Imports `--app` (or the tracker) and returns its deployment definition. */
export const loadDeployment = (app: Option.Option<string>): Effect.Effect<Loaded, AppModuleError> =>
  Option.match(app, {
    onNone: () =>
      Effect.promise(() => import("@cairn/tracker/application")).pipe(
        Effect.map((m) => ({ name: "tracker", definition: m.trackerDeployment as DeploymentDefinition }))
      ),
    onSome: (spec) =>
      Effect.gen(function* () {
        const target = isPath(spec) ? pathToFileURL(resolve(invocationDirectory(), spec)).href : spec
        const module = yield* Effect.tryPromise({
          try: () => import(target) as Promise<Record<string, unknown>>,
          catch: (error) =>
            new AppModuleError({ message: `--app ${spec}: cannot import it: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}` })
        })
        const definition = module[exportName]
        if (typeof definition !== "object" || definition === null) {
          const names = Object.keys(module)
          return yield* new AppModuleError({
            message: `--app ${spec}: the module must export \`${exportName}\` (a DeploymentDefinition: root, policy, handlers, databases); it exports ${names.length > 0 ? names.join(", ") : "nothing"}`
          })
        }
        const absent = missing(definition as Record<string, unknown>)
        if (absent.length > 0) {
          return yield* new AppModuleError({ message: `--app ${spec}: \`${exportName}\` is not a DeploymentDefinition: it has no ${absent.join(", ")}` })
        }
        return { name: spec, definition: definition as DeploymentDefinition }
      })
  })

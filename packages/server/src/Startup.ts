/**
 * How a deployment starts and says so: every operator setting is read and checked before
 * anything binds, and all problems are reported together, one line each, without a stack
 * trace; the log format is the operator's (`CAIRN_LOG_FORMAT`); a failure to start is its
 * message, never a dump. Entry points (`apps/*\/src/main.ts`, the CLI) run `launch`.
 */
import { describeLimitsConfig } from "@cairn/catalog/Describe"
import { queryLimitsConfig } from "@cairn/query/QueryLimits"
import { storeConfig } from "@cairn/store/StoreConfig"
import { syncConfig } from "@cairn/sync/SyncConfig"
import { Cause, Config, ConfigError, Data, Effect, Layer, Logger, Option } from "effect"
import { EscapedErrors } from "./operations/EscapedErrors.js"
import { corsOriginsConfig } from "./http/CorsOrigins.js"
import { limitsConfig } from "./http/Limits.js"
import { loggerFor } from "./operations/LogFormat.js"
import { operatorSettingsConfig } from "./operations/OperatorSettings.js"
import { roleSettingsConfig } from "./operations/RoleSettings.js"
import { settingsConfig } from "./operations/Settings.js"

/** Every setting read through `Config` at startup, together, so that their problems accumulate. */
export const allSettings = Config.all([
  settingsConfig,
  limitsConfig,
  storeConfig,
  queryLimitsConfig,
  syncConfig,
  describeLimitsConfig,
  corsOriginsConfig,
  operatorSettingsConfig,
  roleSettingsConfig,
  Config.literal("pretty", "json", "logfmt")("CAIRN_LOG_FORMAT").pipe(Config.withDefault("pretty" as const))
])

/** One line per problem, as `NAME: what is wrong`. */
export const describeConfigError = (error: ConfigError.ConfigError): ReadonlyArray<string> =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) => [...left, ...right],
    orCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) => [...left, ...right],
    invalidDataCase: (_, path, message) => [path.length === 0 || message.startsWith(path.join("_")) ? message : `${path.join("_")}: ${message}`],
    missingDataCase: (_, path, message) => [`${path.join("_") || "setting"}: ${message}`],
    sourceUnavailableCase: (_, path, message) => [`${path.join("_") || "setting"}: ${message}`],
    unsupportedCase: (_, path, message) => [`${path.join("_") || "setting"}: ${message}`]
  }).filter((line, i, all) => all.indexOf(line) === i)

/** The logger the operator asked for: Effect's pretty lines (default), JSON (one object per line) or logfmt; always redacted. */
export const LoggerLive = Layer.unwrapEffect(
  Effect.map(
    Effect.orElseSucceed(Config.literal("pretty", "json", "logfmt")("CAIRN_LOG_FORMAT").pipe(Config.withDefault("pretty" as const)), () => "pretty" as const),
    (format) => Logger.replace(Logger.defaultLogger, loggerFor(format))
  )
)

/**
 * An error's own words: its message, or, for a wrapper with none (the platform's `ServeError`
 * around a failed `listen`, e.g. a port in use), the words of what it wraps.
 */
const wordsOf = (error: unknown, depth = 0): string | undefined => {
  if (typeof error === "string") return error === "" ? undefined : error
  if (typeof error !== "object" || error === null || depth > 4) return undefined
  const own = "message" in error && typeof error.message === "string" && error.message !== "" ? error.message : undefined
  const inner = "cause" in error ? wordsOf(error.cause, depth + 1) : undefined
  // A generic wrapper's words ("Failed to execute statement") say little without what it wraps (the database's reason).
  return own === undefined ? inner : inner === undefined || own.includes(inner) ? own : `${own}: ${inner}`
}

/** A startup failure in one sentence: the error's own message, whatever its kind. */
const messageOf = (cause: Cause.Cause<unknown>): string => {
  const failure = Option.getOrUndefined(Cause.failureOption(cause)) ?? Option.getOrUndefined(Cause.dieOption(cause))
  if (ConfigError.isConfigError(failure)) return describeConfigError(failure).join("; ")
  return wordsOf(failure) ?? Cause.pretty(cause).split("\n")[0]!
}

/** The deployment did not start; `message` is what the operator reads, `exitCode` 2 for settings, 1 otherwise. */
export class StartupFailed extends Data.TaggedError("StartupFailed")<{ readonly message: string; readonly exitCode: number }> {}

/**
 * Checks every setting, then builds and serves `app` until interrupted (SIGINT/SIGTERM
 * through the runtime). Fails with `StartupFailed`, whose message lists every settings
 * problem at once, or names the one thing that stopped the start.
 */
export const launch = <E, R>(app: Layer.Layer<never, E, R>): Effect.Effect<void, StartupFailed, R> =>
  Effect.gen(function* () {
    const checked = yield* Effect.either(allSettings)
    if (checked._tag === "Left") {
      const lines = describeConfigError(checked.left)
      return yield* new StartupFailed({
        message: `Cairn cannot start; fix ${lines.length === 1 ? "this setting" : `these ${lines.length} settings`}:\n${lines.map((l) => `  - ${l}`).join("\n")}`,
        exitCode: 2
      })
    }
    // The guard first, so it outlives the app's own shutdown.
    const exit = yield* Effect.exit(Layer.launch(Layer.merge(EscapedErrors, app)))
    if (exit._tag === "Failure" && !Cause.isInterruptedOnly(exit.cause)) {
      return yield* new StartupFailed({ message: `Cairn cannot start: ${messageOf(exit.cause)}`, exitCode: 1 })
    }
  }).pipe(Effect.provide(LoggerLive))

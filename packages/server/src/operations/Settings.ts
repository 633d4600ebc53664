/**
 * The operator's deployment settings, read through `Config` with `CAIRN_` names.
 * They name no schema: the application's entry point assembles the deployment.
 */
import { Config, Context, Effect, Layer } from "effect"

export type Stage = "development" | "test" | "staging" | "production"
export const stages: ReadonlyArray<Stage> = ["development", "test", "staging", "production"]

export interface SettingsShape {
  /** TCP port to listen on (0 picks a free one). */
  readonly port: number
  /** Interface to bind; loopback unless the operator opens it. */
  readonly host: string
  /** Public base URL without a trailing slash; every public URL is built from it. */
  readonly baseUrl: string
  /** Directory holding the per-database SQLite files and development keys. */
  readonly dataDir: string
  /** The raw stage setting (`development` when unset); `stage` is it parsed, `undefined` when unrecognized. */
  readonly stageSetting: string
  readonly stage: Stage | undefined
  /** Whether `CAIRN_STAGE` was set at all: the test-hook guard needs a stage the operator chose. */
  readonly stageExplicit: boolean
  /** The raw `CAIRN_TEST_HOOKS` value, if set. */
  readonly testHooksSetting: string | undefined
}

export const settingsConfig: Config.Config<SettingsShape> = Config.all({
  port: Config.integer("CAIRN_PORT").pipe(Config.withDefault(8787)),
  host: Config.string("CAIRN_HOST").pipe(Config.withDefault("127.0.0.1")),
  baseUrl: Config.option(Config.string("CAIRN_BASE_URL")),
  dataDir: Config.string("CAIRN_DATA_DIR").pipe(Config.withDefault("./.cairn")),
  stageSetting: Config.option(Config.string("CAIRN_STAGE")),
  testHooksSetting: Config.option(Config.string("CAIRN_TEST_HOOKS"))
}).pipe(
  Config.map((raw) => ({
    port: raw.port,
    host: raw.host,
    baseUrl: (raw.baseUrl._tag === "Some" ? raw.baseUrl.value : `http://${raw.host.includes(":") ? `[${raw.host}]` : raw.host}:${raw.port}`).replace(/\/+$/, ""),
    dataDir: raw.dataDir,
    stageSetting: raw.stageSetting._tag === "Some" ? raw.stageSetting.value : "development",
    stage: raw.stageSetting._tag === "None" ? "development" : (stages as ReadonlyArray<string>).includes(raw.stageSetting.value) ? (raw.stageSetting.value as Stage) : undefined,
    stageExplicit: raw.stageSetting._tag === "Some",
    testHooksSetting: raw.testHooksSetting._tag === "Some" ? raw.testHooksSetting.value : undefined
  })),
  Config.validate({
    message: "CAIRN_BASE_URL must be an absolute http(s) URL",
    validation: (s) => /^https?:\/\/[^/]+/.test(s.baseUrl)
  })
)

/**
 * A server on loopback at `port` in a stage chosen explicitly (`test` unless given): what tests,
 * benchmarks and embedding tools serve with, instead of reading the environment.
 */
export const onLoopback = (options: {
  readonly port: number
  readonly dataDir: string
  readonly stage?: Stage
  readonly testHooks?: string
}): SettingsShape => {
  const stage = options.stage ?? "test"
  return {
    port: options.port,
    host: "127.0.0.1",
    baseUrl: `http://127.0.0.1:${options.port}`,
    dataDir: options.dataDir,
    stageSetting: stage,
    stage,
    stageExplicit: true,
    testHooksSetting: options.testHooks
  }
}

export class Settings extends Context.Tag("@cairn/server/Settings")<Settings, SettingsShape>() {
  static readonly layerConfig = Layer.effect(Settings, settingsConfig)
  static readonly layer = (settings: SettingsShape) => Layer.succeed(Settings, settings)
  static readonly get = Effect.map(Settings, (s) => s)
}

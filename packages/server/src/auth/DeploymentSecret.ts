/**
 * The deployment secret that seals cursors. Operators set `CAIRN_SECRET`; outside
 * `production` a random secret is created once in the data directory so cursors stay
 * valid across restarts. Production without `CAIRN_SECRET` refuses to start.
 */
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Sealer } from "@cairn/catalog/Sealer"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { Settings } from "../operations/Settings.js"

const loadOrCreate = (dataDir: string): Effect.Effect<Redacted.Redacted<string>> =>
  Effect.sync(() => {
    mkdirSync(dataDir, { recursive: true })
    const file = join(dataDir, "secret")
    if (!existsSync(file)) {
      // `wx` refuses to overwrite a secret another process created meanwhile.
      try {
        writeFileSync(file, randomBytes(32).toString("base64url"), { flag: "wx", mode: 0o600 })
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
      }
      chmodSync(file, 0o600)
    }
    return Redacted.make(readFileSync(file, "utf8").trim())
  })

export const deploymentSecret = Effect.gen(function* () {
  const settings = yield* Settings
  const configured = yield* Config.option(Config.redacted("CAIRN_SECRET"))
  if (Option.isSome(configured)) {
    if (Redacted.value(configured.value).length < 32) {
      return yield* Effect.dieMessage("CAIRN_SECRET must be at least 32 characters")
    }
    return configured.value
  }
  if (settings.stage === "production" || settings.stage === undefined) {
    return yield* Effect.dieMessage(
      `CAIRN_SECRET is required in stage "${settings.stageSetting}" (set it to 32+ random characters)`
    )
  }
  return yield* loadOrCreate(settings.dataDir)
})

/** `Sealer` under the deployment secret. */
export const SealerLive = Layer.effect(Sealer, Effect.map(deploymentSecret, Sealer.make))

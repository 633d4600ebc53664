/**
 * The front's request limits: the largest accepted body and the overall time one
 * request may take. Both are operator settings (`CAIRN_MAX_BODY_BYTES`,
 * `CAIRN_REQUEST_TIMEOUT_MS`) with defaults that protect a multi-tenant deployment.
 */
import { Config, Context, Layer } from "effect"

export interface LimitsShape {
  /** Largest accepted request body, in bytes. */
  readonly maxBodyBytes: number
  /** Overall time one request may take before it is abandoned, in milliseconds. */
  readonly requestTimeoutMs: number
}

export const defaultLimits: LimitsShape = { maxBodyBytes: 1024 * 1024, requestTimeoutMs: 30_000 }

export const limitsConfig: Config.Config<LimitsShape> = Config.all({
  maxBodyBytes: Config.integer("CAIRN_MAX_BODY_BYTES").pipe(
    Config.withDefault(defaultLimits.maxBodyBytes),
    Config.validate({ message: "CAIRN_MAX_BODY_BYTES must be a positive number of bytes", validation: (n) => n > 0 })
  ),
  requestTimeoutMs: Config.integer("CAIRN_REQUEST_TIMEOUT_MS").pipe(
    Config.withDefault(defaultLimits.requestTimeoutMs),
    Config.validate({ message: "CAIRN_REQUEST_TIMEOUT_MS must be a positive number of milliseconds", validation: (n) => n > 0 })
  )
})

export class Limits extends Context.Tag("@cairn/server/Limits")<Limits, LimitsShape>() {
  static readonly layer = (limits: Partial<LimitsShape> = {}) => Layer.succeed(Limits, { ...defaultLimits, ...limits })
  static readonly layerConfig = Layer.effect(Limits, limitsConfig)
}

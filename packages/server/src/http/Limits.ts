/**
 * The front's request limits: the largest accepted body, the overall time one request
 * may take, and how far a streamed sync answer may run ahead of its reader. All are
 * operator settings with defaults that protect a multi-tenant deployment.
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Context, Layer } from "effect"

export interface LimitsShape {
  /** Largest accepted request body, in bytes. */
  readonly maxBodyBytes: number
  /** Overall time one request may take before it is abandoned, in milliseconds. */
  readonly requestTimeoutMs: number
  /**
   * Most bytes of one `/db/sync` answer written but not yet taken by the caller's socket:
   * past it, the stream produces nothing more until the socket drains.
   */
  readonly syncStreamBufferBytes: number
  /**
   * How long a sync stream may stay past its buffer bound before it is closed; the caller
   * resumes from the last checkpoint it received.
   */
  readonly syncStreamStallMs: number
}

export const defaultLimits: LimitsShape = {
  maxBodyBytes: 1024 * 1024,
  requestTimeoutMs: 30_000,
  syncStreamBufferBytes: 4 * 1024 * 1024,
  syncStreamStallMs: 30_000
}

const positive = (name: string, fallback: number, unit: string) => positiveInteger(name, unit).pipe(Config.withDefault(fallback))

export const limitsConfig: Config.Config<LimitsShape> = Config.all({
  maxBodyBytes: positive("CAIRN_MAX_BODY_BYTES", defaultLimits.maxBodyBytes, "bytes"),
  requestTimeoutMs: positive("CAIRN_REQUEST_TIMEOUT_MS", defaultLimits.requestTimeoutMs, "milliseconds"),
  syncStreamBufferBytes: positive("CAIRN_SYNC_STREAM_BUFFER_BYTES", defaultLimits.syncStreamBufferBytes, "bytes"),
  syncStreamStallMs: positive("CAIRN_SYNC_STREAM_STALL_MS", defaultLimits.syncStreamStallMs, "milliseconds")
})

export class Limits extends Context.Tag("@cairn/server/Limits")<Limits, LimitsShape>() {
  static readonly layer = (limits: Partial<LimitsShape> = {}) => Layer.succeed(Limits, { ...defaultLimits, ...limits })
  static readonly layerConfig = Layer.effect(Limits, limitsConfig)
}

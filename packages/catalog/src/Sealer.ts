/**
 * Seals continuation cursors (describe, query, sync): AES-256-GCM under a deployment
 * secret, so a cursor is opaque to callers and any tampering is detected. The purpose is
 * the authenticated data, so a cursor of one kind never opens as another, and the
 * payload is encoded and decoded with a schema, so an opened cursor is a typed value.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { Config, Context, Layer, Option, Redacted, Schema } from "effect"
import { labelled } from "./Digest.js"

/** Every kind of sealed cursor; a new kind is added here, never passed as a free string. */
export const Purpose = Schema.Literal("describe", "query", "sync", "sync-page", "upload", "file-link")
export type Purpose = typeof Purpose.Type

/** Longer input is refused before any work: no cursor this service seals comes near it. */
const MAX_SEALED = 8192
/** 12 bytes of IV, at least one of ciphertext, 16 of tag. */
const MIN_RAW = 29

export interface SealerService {
  /** Seals `value` for `purpose`. `value` is the caller's own, so failing to encode it is a defect. */
  readonly seal: <A, I>(purpose: Purpose, schema: Schema.Schema<A, I, never>, value: A) => string
  /** The payload if `sealed` was sealed by this secret for `purpose` and decodes with `schema`; otherwise none. */
  readonly open: <A, I>(purpose: Purpose, schema: Schema.Schema<A, I, never>, sealed: string) => Option.Option<A>
}

/**
 * Fresh random IVs, drawn from a pool refilled every 256 seals: a call to the random
 * source per seal cost as much as the encryption. A refill allocates a new pool, so an
 * IV handed out is never overwritten.
 */
let ivPool = Buffer.alloc(0)
let ivOffset = 0
const nextIv = (): Buffer => {
  if (ivOffset + 12 > ivPool.length) {
    ivPool = randomBytes(12 * 256)
    ivOffset = 0
  }
  ivOffset += 12
  return ivPool.subarray(ivOffset - 12, ivOffset)
}

/** One encoder per payload schema, built once. */
const encoders = new WeakMap<Schema.Schema<any, any, never>, (value: unknown) => unknown>()
const encoderOf = <A, I>(schema: Schema.Schema<A, I, never>): ((value: A) => I) => {
  let encode = encoders.get(schema)
  if (encode === undefined) encoders.set(schema, (encode = Schema.encodeSync(schema) as (value: unknown) => unknown))
  return encode as (value: A) => I
}

export const make = (secret: Redacted.Redacted<string>): SealerService => {
  const key = labelled("cairn/cursor/v1", Redacted.value(secret)).bytes
  const openRaw = (purpose: Purpose, sealed: string): Option.Option<unknown> => {
    try {
      if (sealed.length > MAX_SEALED) return Option.none()
      const raw = Buffer.from(sealed, "base64url")
      if (raw.length < MIN_RAW) return Option.none()
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
      decipher.setAAD(Buffer.from(purpose))
      decipher.setAuthTag(raw.subarray(raw.length - 16))
      const body = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()])
      return Option.some(JSON.parse(body.toString("utf8")) as unknown)
    } catch {
      // A failed tag check or unparsable body: not a cursor we sealed for this purpose.
      return Option.none()
    }
  }
  return {
    seal: (purpose, schema, value) => {
      const iv = nextIv()
      const cipher = createCipheriv("aes-256-gcm", key, iv)
      cipher.setAAD(Buffer.from(purpose))
      const json = JSON.stringify(encoderOf(schema)(value))
      const body = Buffer.concat([cipher.update(json, "utf8"), cipher.final()])
      return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url")
    },
    open: (purpose, schema, sealed) => Option.flatMap(openRaw(purpose, sealed), Schema.decodeUnknownOption(schema))
  }
}

/** The cursor sealer; required, since a default secret would make every cursor forgeable. */
export class Sealer extends Context.Tag("@cairn/catalog/Sealer")<Sealer, SealerService>() {
  static readonly make = make
  static readonly layer = (secret: Redacted.Redacted<string>) => Layer.succeed(Sealer, make(secret))
  static readonly layerConfig = Layer.effect(Sealer, Config.redacted("CAIRN_SECRET").pipe(Config.map(make)))
}

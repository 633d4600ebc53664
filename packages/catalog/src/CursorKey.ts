/**
 * Seals continuation cursors (describe, query, sync): AES-256-GCM under a deployment
 * secret, so a cursor is opaque to callers and any tampering is detected. Each use
 * has its own purpose label, so a cursor of one kind never opens as another.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { Config, Context, Layer, Option, Redacted } from "effect"

export interface Sealer {
  readonly seal: (purpose: string, payload: unknown) => string
  readonly open: (purpose: string, sealed: string) => Option.Option<unknown>
}

export const makeSealer = (secret: Redacted.Redacted<string>): Sealer => {
  const key = createHash("sha256").update("cairn/cursor/v1\0").update(Redacted.value(secret)).digest()
  return {
    seal: (purpose, payload) => {
      const iv = randomBytes(12)
      const cipher = createCipheriv("aes-256-gcm", key, iv)
      cipher.setAAD(Buffer.from(purpose))
      const body = Buffer.concat([cipher.update(JSON.stringify(payload), "utf8"), cipher.final()])
      return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url")
    },
    open: (purpose, sealed) => {
      try {
        if (sealed.length > 8192) return Option.none()
        const raw = Buffer.from(sealed, "base64url")
        if (raw.length < 29) return Option.none()
        const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
        decipher.setAAD(Buffer.from(purpose))
        decipher.setAuthTag(raw.subarray(raw.length - 16))
        const body = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()])
        return Option.some(JSON.parse(body.toString("utf8")) as unknown)
      } catch {
        return Option.none()
      }
    }
  }
}

export class CursorKey extends Context.Tag("@cairn/catalog/CursorKey")<CursorKey, Sealer>() {
  static readonly layer = (secret: Redacted.Redacted<string>) => Layer.succeed(CursorKey, makeSealer(secret))
  static readonly layerConfig = Layer.effect(
    CursorKey,
    Config.redacted("CAIRN_SECRET").pipe(Config.map(makeSealer))
  )
}

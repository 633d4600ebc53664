/**
 * What `cairn token` needs and nothing more: the record a running development server leaves in
 * its data directory (`<dataDir>/dev-issuer/issuer.json`: issuer URL, base URL, pid) and ES256
 * signing with `node:crypto`. Deliberately free of Effect, jose and the server: the command must
 * answer in a fraction of a second, and loading those costs seconds on a shared machine.
 */
import { createPrivateKey, randomUUID, sign } from "node:crypto"
import { readFileSync } from "node:fs"
import { join } from "node:path"

/** What the development server writes when it starts trusting the development issuer. */
export interface IssuerRecord {
  /** The issuer identifier (`iss`) the server trusts. */
  readonly issuer: string
  /** The server's public base URL: token audiences are `{baseUrl}/db` and `{baseUrl}/mcp`. */
  readonly baseUrl: string
  /** The server process, to tell a running server from a record a killed one left behind. */
  readonly pid: number
  readonly startedAt: string
}

/** Where the development key lives inside a data directory. */
export const devKeyPath = (dataDir: string): string => join(dataDir, "dev-issuer", "key.json")

/** Where the record lives inside a data directory, next to the development key. */
export const issuerRecordPath = (dataDir: string): string => join(dataDir, "dev-issuer", "issuer.json")

const isRecord = (value: unknown): value is IssuerRecord =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as IssuerRecord).issuer === "string" &&
  typeof (value as IssuerRecord).baseUrl === "string" &&
  Number.isSafeInteger((value as IssuerRecord).pid) &&
  typeof (value as IssuerRecord).startedAt === "string"

/** The record decoded, or why there is none (`absent` when the file does not exist). */
export const readIssuerRecord = (dataDir: string): IssuerRecord | "absent" | "unreadable" => {
  let text: string
  try {
    text = readFileSync(issuerRecordPath(dataDir), "utf8")
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? "absent" : "unreadable"
  }
  try {
    const parsed: unknown = JSON.parse(text)
    return isRecord(parsed) ? parsed : "unreadable"
  } catch {
    return "unreadable"
  }
}

/** Whether the process `pid` still exists (EPERM: it does, under another user). */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const base64url = (data: string | Buffer) => Buffer.from(data).toString("base64url")

export interface MintOptions {
  /** The private ES256 JWK with its `kid`, as `<dataDir>/dev-issuer/key.json` holds it. */
  readonly privateJwk: { readonly kid: string } & Record<string, unknown>
  readonly issuer: string
  readonly subject: string
  readonly audience: string
  readonly claims: Readonly<Record<string, unknown>>
  readonly scope: string
  readonly ttlSeconds: number
  readonly now: number
}

/** An RFC 9068 access token signed ES256, the same claims `signDevToken` puts in. */
export const mint = (options: MintOptions): string => {
  const header = { alg: "ES256", kid: options.privateJwk.kid, typ: "at+jwt" }
  const now = Math.floor(options.now / 1000)
  const payload = {
    ...options.claims,
    scope: options.scope,
    client_id: "cairn-token-script",
    iss: options.issuer,
    sub: options.subject,
    aud: options.audience,
    iat: now,
    nbf: now,
    exp: now + options.ttlSeconds,
    jti: randomUUID()
  }
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}`
  const key = createPrivateKey({ key: options.privateJwk as import("node:crypto").JsonWebKey, format: "jwk" })
  return `${input}.${base64url(sign("sha256", Buffer.from(input), { key, dsaEncoding: "ieee-p1363" }))}`
}

/**
 * `cairn token`: a development access token for the server running on a data directory. It
 * trusts what that server wrote (`<dataDir>/dev-issuer/issuer.json`: issuer and base URL) and
 * its key, and refuses when the settings given name another server. Loads no Effect and no
 * server module, so it answers in a fraction of a second; `cli.ts` runs it before anything else.
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { parseArgs } from "node:util"
import { accessScopes } from "@cairn/domain/AccessScope"
import { devKeyPath, isAlive, issuerRecordPath, mint, readIssuerRecord } from "@cairn/devauth/DevToken"

export interface TokenOptions {
  readonly sub: string
  /** The `org` claim (the tracker's database key), if given. */
  readonly org: string | undefined
  /** The `cairn_db` claim: which database deployment, when the deployment has several. */
  readonly db?: string | undefined
  readonly roles: ReadonlyArray<string>
  readonly scope: string | undefined
  readonly resource: string
  readonly ttl: number
  /** The base URL the caller expects the server at (`--base`); checked against the server's. */
  readonly base: string | undefined
}

/** The settings a token is minted under: the same `CAIRN_*` variables the server reads. */
export interface TokenEnvironment {
  readonly CAIRN_DATA_DIR?: string | undefined
  readonly CAIRN_BASE_URL?: string | undefined
  readonly CAIRN_PORT?: string | undefined
  readonly CAIRN_HOST?: string | undefined
  readonly CAIRN_DEV_ISSUER_URL?: string | undefined
  readonly CAIRN_ISSUER?: string | undefined
}

export type Minted = { readonly _tag: "Minted"; readonly token: string } | { readonly _tag: "Refused"; readonly message: string }

const refused = (message: string): Minted => ({ _tag: "Refused", message })
const trim = (url: string) => url.replace(/\/+$/, "")

/** The base URL the environment or `--base` asks for, and where that expectation comes from. */
const expectedBase = (options: TokenOptions, env: TokenEnvironment): { readonly url: string; readonly from: string } | undefined => {
  if (options.base !== undefined) return { url: trim(options.base), from: "--base" }
  if (env.CAIRN_BASE_URL) return { url: trim(env.CAIRN_BASE_URL), from: "CAIRN_BASE_URL" }
  if (env.CAIRN_PORT) {
    const host = env.CAIRN_HOST || "127.0.0.1"
    return { url: `http://${host.includes(":") ? `[${host}]` : host}:${env.CAIRN_PORT}`, from: `CAIRN_PORT=${env.CAIRN_PORT}` }
  }
  return undefined
}

/** Mints a token for the server running on `CAIRN_DATA_DIR`, or says which setting names another one. */
export const mintForRunningServer = (options: TokenOptions, env: TokenEnvironment, now = Date.now()): Minted => {
  if (env.CAIRN_ISSUER && env.CAIRN_ISSUER.trim() !== "") {
    return refused(`CAIRN_ISSUER is set, so the server trusts only ${env.CAIRN_ISSUER}; get a token from that issuer instead.`)
  }
  if (options.resource !== "db" && options.resource !== "mcp") return refused("--resource must be db or mcp")
  if (!Number.isSafeInteger(options.ttl) || options.ttl <= 0 || options.ttl > 30 * 86_400) {
    return refused("--ttl must be a whole number of seconds, at most 30 days")
  }
  const dataDir = env.CAIRN_DATA_DIR || "./.cairn"
  const where = `the data directory ${resolve(dataDir)} (CAIRN_DATA_DIR${env.CAIRN_DATA_DIR ? "" : " unset, so ./.cairn"})`
  const record = readIssuerRecord(dataDir)
  if (record === "absent") {
    return refused(
      `No running Cairn development server uses ${where}: ${issuerRecordPath(dataDir)} does not exist. Start the server (npm start) with the same CAIRN_DATA_DIR, or set CAIRN_DATA_DIR to the server's.`
    )
  }
  if (record === "unreadable") return refused(`${issuerRecordPath(dataDir)} is not a development issuer record; restart the server using ${where}.`)
  if (!isAlive(record.pid)) {
    return refused(
      `The Cairn server that used ${where} (pid ${record.pid}, ${record.baseUrl}) is no longer running; start it again (npm start) with the same settings.`
    )
  }
  const expected = expectedBase(options, env)
  if (expected !== undefined && expected.url !== record.baseUrl) {
    return refused(
      `The server running on ${where} serves ${record.baseUrl}, not ${expected.url} (from ${expected.from}): its tokens would be refused there. Use the server's settings, or the data directory of the server at ${expected.url}.`
    )
  }
  if (env.CAIRN_DEV_ISSUER_URL && trim(env.CAIRN_DEV_ISSUER_URL) !== record.issuer) {
    return refused(
      `The server running on ${where} trusts the development issuer ${record.issuer}, not ${trim(env.CAIRN_DEV_ISSUER_URL)} (from CAIRN_DEV_ISSUER_URL).`
    )
  }
  let privateJwk: { readonly kid: string } & Record<string, unknown>
  try {
    const jwk: unknown = JSON.parse(readFileSync(devKeyPath(dataDir), "utf8"))
    if (typeof jwk !== "object" || jwk === null || typeof (jwk as { kid?: unknown }).kid !== "string" || typeof (jwk as { d?: unknown }).d !== "string") {
      return refused(`${devKeyPath(dataDir)} is not the development signing key; restart the server using ${where}.`)
    }
    privateJwk = jwk as { readonly kid: string } & Record<string, unknown>
  } catch {
    return refused(`The development signing key ${devKeyPath(dataDir)} cannot be read; restart the server using ${where}.`)
  }
  return {
    _tag: "Minted",
    token: mint({
      privateJwk,
      issuer: record.issuer,
      subject: options.sub,
      audience: `${record.baseUrl}/${options.resource}`,
      claims: {
        ...(options.org !== undefined ? { org: options.org } : {}),
        ...(options.db !== undefined ? { cairn_db: options.db } : {}),
        ...(options.roles.length > 0 ? { roles: options.roles } : {})
      },
      scope: options.scope ?? accessScopes.join(" "),
      ttlSeconds: options.ttl,
      now
    })
  }
}

export const splitRoles = (values: ReadonlyArray<string>): ReadonlyArray<string> =>
  values.flatMap((v) => v.split(/[\s,]+/)).filter((r) => r !== "")

const usage =
  'usage: cairn token --sub <subject> [--org <org>] [--db <database deployment>] [--roles "admin ..."] [--scope "cairn:read cairn:write"] [--resource db|mcp] [--ttl <seconds>] [--base <url>]'

/** `cairn token <args>` as a process: prints the token, or one line on stderr and exit status 1. */
export const runTokenCommand = (args: ReadonlyArray<string>, env: TokenEnvironment): void => {
  const fail = (message: string) => {
    process.stderr.write(`token: ${message}\n`)
    process.exitCode = 1
  }
  let values
  try {
    values = parseArgs({
      args: [...args],
      options: {
        sub: { type: "string" },
        org: { type: "string" },
        db: { type: "string" },
        roles: { type: "string", multiple: true },
        scope: { type: "string" },
        resource: { type: "string", default: "db" },
        ttl: { type: "string", default: "3600" },
        base: { type: "string" }
      },
      strict: true,
      allowPositionals: false
    }).values
  } catch (error) {
    return fail(`${error instanceof Error ? error.message : String(error)}\n${usage}`)
  }
  if (!values.sub) return fail(`--sub is required\n${usage}`)
  if (!values.org && !values.db) return fail(`--org is required (or --db for a deployment with several database deployments)\n${usage}`)
  const minted = mintForRunningServer(
    {
      sub: values.sub,
      org: values.org,
      db: values.db,
      roles: splitRoles(values.roles ?? []),
      scope: values.scope,
      resource: values.resource ?? "db",
      ttl: Number(values.ttl),
      base: values.base
    },
    env
  )
  if (minted._tag === "Refused") return fail(minted.message)
  process.stdout.write(minted.token + "\n")
}

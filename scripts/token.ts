/**
 * Prints a development access token and nothing else:
 *   npm run -s token -- --sub alice --org acme [--roles admin] [--scope "cairn:read"] [--resource db|mcp] [--ttl 3600]
 *   npm run -s token -- --sub alice --db personal          # cairn_db: which database deployment (several)
 * Signed with the development issuer's key (created in CAIRN_DATA_DIR if missing), for the
 * audience `{CAIRN_BASE_URL}/{resource}`, so the server started with the same settings accepts it.
 */
import { parseArgs } from "node:util"
import { Cause, Config, Effect, Exit, Option } from "effect"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Settings, settingsConfig } from "@cairn/server/Settings"

const usage =
  'usage: npm run -s token -- --sub <subject> [--org <org>] [--db <database deployment>] [--roles "admin ..."] [--scope "cairn:read cairn:write"] [--resource db|mcp] [--ttl <seconds>]'

const fail = (message: string) => Effect.fail(`${message}\n${usage}`)

const program = Effect.gen(function* () {
  const { values } = yield* Effect.try({
    try: () =>
      parseArgs({
        options: {
          sub: { type: "string" },
          org: { type: "string" },
          db: { type: "string" },
          roles: { type: "string" },
          scope: { type: "string" },
          resource: { type: "string", default: "db" },
          ttl: { type: "string", default: "3600" }
        },
        strict: true,
        allowPositionals: false
      }),
    catch: (error) => `${error instanceof Error ? error.message : String(error)}\n${usage}`
  })
  if (!values.sub) return yield* fail("--sub is required")
  if (!values.org && !values.db) return yield* fail("--org is required (or --db for a deployment with several database deployments)")
  if (values.resource !== "db" && values.resource !== "mcp") return yield* fail("--resource must be db or mcp")
  const ttl = Number(values.ttl)
  if (!Number.isSafeInteger(ttl) || ttl <= 0 || ttl > 30 * 86_400) return yield* fail("--ttl must be a whole number of seconds, at most 30 days")
  const settings = yield* settingsConfig
  const external = yield* Config.option(Config.string("CAIRN_ISSUER"))
  if (Option.isSome(external) && external.value.trim() !== "") {
    return yield* Effect.fail(`CAIRN_ISSUER is set, so the server trusts only ${external.value}; get a token from that issuer instead.`)
  }
  const issuer = yield* devIssuer.pipe(Effect.provideService(Settings, settings))
  const roles = (values.roles ?? "").split(/[\s,]+/).filter((r) => r !== "")
  return yield* signDevToken(issuer, {
    subject: values.sub,
    audience: `${settings.baseUrl}/${values.resource}`,
    claims: {
      ...(values.org ? { org: values.org } : {}),
      ...(values.db ? { cairn_db: values.db } : {}),
      ...(roles.length > 0 ? { roles } : {})
    },
    scope: values.scope ?? accessScopes.join(" "),
    ttlSeconds: ttl
  })
})

const exit = await Effect.runPromiseExit(program)
if (Exit.isSuccess(exit)) {
  process.stdout.write(exit.value + "\n")
} else {
  const error = Cause.failureOption(exit.cause)
  const message = Option.match(error, {
    onNone: () => Cause.pretty(exit.cause),
    onSome: (e) => (typeof e === "string" ? e : e instanceof Error || (typeof e === "object" && e !== null && "message" in e) ? String((e as { message: unknown }).message) : String(e))
  })
  process.stderr.write(`token: ${message}\n`)
  process.exitCode = 1
}

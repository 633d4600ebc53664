/**
 * The CLI's side of the operator listener (`cairn doctor`, online `cairn restore`): finds the
 * server running on the data directory by the credential it wrote (`<dataDir>/operator.json`) and
 * sends it one per-database action. Also how a command names a database: by the claims a token
 * carries (`--database <value>`, and `--db <name>` when the deployment has several database
 * deployments), mapped exactly as the server maps a verified token.
 */
import { readFileSync } from "node:fs"
import { Effect, Option, Schema } from "effect"
import { isAlive } from "@cairn/devauth/DevToken"
import { type DeploymentDefinition, databaseKeyOf } from "@cairn/server/engine/Deployment"
import { credentialPath, type OperatorCredential } from "@cairn/server/operations/OperatorAdmin"
import { databaseId } from "@cairn/store/Databases"

/** The database a command names: `value` of the key claim in database deployment `db` (needed only when there are several). */
export const selectDatabase = (definition: DeploymentDefinition, value: string, db: Option.Option<string>): Effect.Effect<string, string> => {
  const names = definition.databases.map((d) => d.name)
  const chosen = Option.isSome(db)
    ? definition.databases.find((d) => d.name === db.value)
    : definition.databases.length === 1
      ? definition.databases[0]
      : undefined
  if (chosen === undefined) {
    return Effect.fail(
      Option.isSome(db)
        ? `--db ${db.value}: the deployment has no database deployment of that name (it has ${names.join(", ")})`
        : `the deployment has several database deployments (${names.join(", ")}): pass --db <name>, as a token's cairn_db claim names one`
    )
  }
  if (value === "" || /[\u0000-\u001f\u007f]/.test(value)) return Effect.fail("--database must be the key claim's value as tokens carry it (e.g. the org)")
  return Effect.succeed(databaseId(databaseKeyOf(chosen, value)))
}

const Credential = Schema.Struct({ url: Schema.String, token: Schema.String, pid: Schema.Number })

/** The credential of a server running on `dataDir` with its operator listener, if one is. */
export const runningServer = (dataDir: string): Option.Option<OperatorCredential> => {
  let text: string
  try {
    text = readFileSync(credentialPath(dataDir), "utf8")
  } catch {
    return Option.none()
  }
  return Option.filter(Schema.decodeUnknownOption(Schema.parseJson(Credential))(text), (c) => isAlive(c.pid))
}

export const notRunning = (dataDir: string) =>
  `no running Cairn server with an operator listener uses ${dataDir}: start it (embedded) with CAIRN_METRICS_PORT set (e.g. 9464, or 0 for any free loopback port) and the same CAIRN_DATA_DIR`

/** One action on the running server: its JSON answer, or its error as one line. */
export const call = <A>(server: OperatorCredential, method: "GET" | "POST", path: string, body?: unknown): Effect.Effect<A, string> =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${server.token}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {})
      })
      const answer = (await response.json()) as { readonly error?: string }
      if (!response.ok) throw new Error(answer.error ?? `the server answered ${response.status}`)
      return answer as A
    },
    catch: (error) => `the running server (${server.url}): ${error instanceof Error ? error.message : String(error)}`
  })

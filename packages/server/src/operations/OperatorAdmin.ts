/**
 * The operator's per-database actions on the operator listener (`CAIRN_METRICS_PORT`, loopback by
 * default, never the public port), beside `/metrics`: `GET /admin/databases`, `POST /admin/check`,
 * `POST /admin/clear-fault`, `POST /admin/restore`. What they do is `OperatorAdmin`, provided by the
 * embedded placement (the store's `DatabaseAdmin`); absent (a front of a cluster), nothing is served.
 *
 * Authentication: a random operator credential the server writes at startup to
 * `<dataDir>/operator.json` (mode 0600, with the listener's URL and the server's pid) and removes
 * when it stops. Whoever can read the data directory can already read every database; nobody else
 * can act, and a restart rotates it. `cairn doctor` and `cairn restore` read it from `CAIRN_DATA_DIR`.
 */
import { randomBytes, timingSafeEqual } from "node:crypto"
import { rmSync, writeFileSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { join } from "node:path"
import { Context, Effect, Runtime, Schema } from "effect"
import {
  type ClearFaultResult,
  type DatabaseListing,
  type IntegrityResult,
  RestoreRequest,
  type RestoreResult
} from "@cairn/domain/DatabaseAdmin"

/** Why an action was not done, in one operator-facing sentence (nothing was changed). */
export interface AdminFailure {
  readonly message: string
}

export interface OperatorAdminShape {
  readonly list: Effect.Effect<ReadonlyArray<DatabaseListing>>
  readonly check: (id: string) => Effect.Effect<IntegrityResult, AdminFailure>
  readonly clearFault: (id: string) => Effect.Effect<ClearFaultResult, AdminFailure>
  readonly restore: (request: RestoreRequest) => Effect.Effect<RestoreResult, AdminFailure>
}

export class OperatorAdmin extends Context.Tag("@cairn/server/OperatorAdmin")<OperatorAdmin, OperatorAdminShape>() {}

/** Where the running server's operator credential is: `<dataDir>/operator.json`. */
export const credentialPath = (dataDir: string) => join(dataDir, "operator.json")

export interface OperatorCredential {
  /** The operator listener's base URL (`http://127.0.0.1:<port>`). */
  readonly url: string
  readonly token: string
  readonly pid: number
}

/** Writes a fresh credential for the listener at `url`; removed when the scope closes. */
export const writeCredential = (dataDir: string, url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const credential: OperatorCredential = { url, token: randomBytes(32).toString("base64url"), pid: process.pid }
      writeFileSync(credentialPath(dataDir), `${JSON.stringify(credential)}\n`, { mode: 0o600 })
      return credential
    }),
    () => Effect.sync(() => rmSync(credentialPath(dataDir), { force: true }))
  )

const bodyLimit = 64 * 1024

const readBody = (request: IncomingMessage) =>
  new Promise<unknown>((resolve, reject) => {
    let text = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => {
      text += chunk
      if (text.length > bodyLimit) reject(new Error("the request body is too large"))
    })
    request.on("end", () => {
      try {
        resolve(text === "" ? {} : JSON.parse(text))
      } catch {
        reject(new Error("the request body is not JSON"))
      }
    })
    request.on("error", reject)
  })

const IdBody = Schema.Struct({ id: Schema.String })
const CheckBody = Schema.Struct({ id: Schema.optional(Schema.String) })

const send = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body)}\n`)
}

const authorized = (request: IncomingMessage, token: string) => {
  const given = Buffer.from((request.headers.authorization ?? "").replace(/^Bearer /, ""))
  const expected = Buffer.from(token)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * Serves `/admin/*` on the operator listener; answers whether the request was one. Every failure is
 * one sentence in `{ error }`; an action on one database never waits for another's.
 */
export const adminHandler = (admin: OperatorAdminShape, token: string, runtime: Runtime.Runtime<never>) =>
  (request: IncomingMessage, response: ServerResponse, path: string): boolean => {
    if (!path.startsWith("/admin/")) return false
    if (!authorized(request, token)) {
      send(response, 401, { error: "the operator credential is missing or wrong: use the one the server wrote to <dataDir>/operator.json" })
      return true
    }
    const run = <A>(effect: Effect.Effect<A, AdminFailure>) =>
      Runtime.runPromise(runtime)(Effect.either(effect)).then(
        (result) => (result._tag === "Right" ? send(response, 200, result.right) : send(response, 409, { error: result.left.message })),
        (defect) => send(response, 500, { error: `the action failed unexpectedly (${defect instanceof Error ? defect.message : String(defect)}); see the server's log` })
      )
    const withBody = <I, A>(schema: Schema.Schema<I, any>, act: (body: I) => Effect.Effect<A, AdminFailure>) =>
      readBody(request).then(
        (body) => {
          const decoded = Schema.decodeUnknownEither(schema)(body)
          return decoded._tag === "Left" ? send(response, 400, { error: `the request does not have the expected fields` }) : run(act(decoded.right))
        },
        (error: Error) => send(response, 400, { error: error.message })
      )
    const route = `${request.method} ${path}`
    if (route === "GET /admin/databases") void run(Effect.map(admin.list, (databases) => ({ databases })))
    else if (route === "POST /admin/check") {
      void withBody(CheckBody, ({ id }) =>
        Effect.map(
          id === undefined
            ? Effect.flatMap(admin.list, (all) => Effect.forEach(all, (d) => admin.check(d.id)))
            : Effect.map(admin.check(id), (one) => [one]),
          (results) => ({ results })
        )
      )
    } else if (route === "POST /admin/clear-fault") void withBody(IdBody, ({ id }) => admin.clearFault(id))
    else if (route === "POST /admin/restore") void withBody(RestoreRequest, (body) => admin.restore(body))
    else send(response, 404, { error: "no such operator action: GET /admin/databases, POST /admin/check, /admin/clear-fault or /admin/restore" })
    return true
  }

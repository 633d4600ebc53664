// The notes example served by the same `App` as `npm start` serves the tracker, in process on
// free 127.0.0.1 ports with a fresh data directory; tokens signed by the development issuer
// with whatever verified claims a test needs; and raw calls on RPC, MCP and sync, as any
// HTTP client makes them.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Settings, type SettingsShape } from "@cairn/server/Settings"
import { App } from "@cairn/server-app/App"
import { freePort } from "@cairn/testkit/freePort"
import { ConfigProvider, Effect, Layer, Logger, LogLevel } from "effect"
import { notesDeployment } from "../src/application.js"

export interface Claims {
  readonly sub: string
  readonly resource?: "db" | "mcp"
  readonly [claim: string]: unknown
}

export interface Running {
  readonly base: string
  readonly token: (claims: Claims) => Effect.Effect<string>
}

/** Starts the notes app for the current scope. */
export const startNotes = Effect.gen(function* () {
  const port = yield* freePort()
  const base = `http://127.0.0.1:${port}`
  const settings: SettingsShape = {
    port,
    host: "127.0.0.1",
    baseUrl: base,
    dataDir: mkdtempSync(join(tmpdir(), "cairn-notes-")),
    stageSetting: "test",
    stageExplicit: true,
    stage: "test",
    testHooksSetting: undefined
  }
  const env = ConfigProvider.fromMap(
    new Map([
      ["CAIRN_DEV_ISSUER_URL", `http://127.0.0.1:${yield* freePort()}`],
      ["CAIRN_SQLITE_SYNCHRONOUS", "NORMAL"]
    ])
  )
  yield* Layer.build(
    App(notesDeployment).pipe(
      Layer.provide(Settings.layer(settings)),
      Layer.provide(Layer.setConfigProvider(env)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings), Effect.withConfigProvider(env), Effect.orDie)
  const token = ({ resource, sub, ...claims }: Claims) =>
    signDevToken(dev, { subject: sub, audience: `${base}/${resource ?? "db"}`, claims, scope: accessScopes.join(" "), ttlSeconds: 3600 })
  return { base, token } satisfies Running
})

/** What one call answered: the HTTP status, a public error or a value, and the raw text. */
export interface Answer {
  readonly status: number
  readonly error?: { readonly code: string; readonly message: string }
  readonly value?: any
  readonly text: string
  readonly headers: Headers
}

const codeOfTag: Readonly<Record<string, string>> = {
  InvalidQuery: "invalid_query",
  UnknownDefinition: "unknown_definition",
  InvalidInput: "invalid_input",
  Inaccessible: "inaccessible",
  CatalogChanged: "catalog_changed",
  QueryBudgetExceeded: "query_budget_exceeded",
  OperationRejected: "operation_rejected",
  InvocationConflict: "invocation_conflict"
}

const fromExit = (status: number, text: string, headers: Headers, exit: any): Answer => {
  if (exit?._tag === "Success") return { status, value: exit.value, text, headers }
  const error = exit?.cause?._tag === "Fail" ? exit.cause.error : undefined
  return error && codeOfTag[error._tag] ? { status, error: { code: codeOfTag[error._tag]!, message: error.message }, text, headers } : { status, text, headers }
}

const post = (url: string, token: string, body: string, headers: Record<string, string>) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${token}`, ...headers }, body })
    return { status: response.status, text: await response.text(), headers: response.headers }
  })

/** One RPC on `/db/rpc`. */
export const rpc = (app: Running, token: string, tag: "Describe" | "Query" | "Mutate", payload: unknown) =>
  Effect.map(
    post(`${app.base}/db/rpc`, token, JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] }), { "content-type": "application/json" }),
    ({ status, text, headers }): Answer =>
      status !== 200 ? { status, text, headers } : fromExit(status, text, headers, (JSON.parse(text) as Array<any>).find((m) => m._tag === "Exit")?.exit)
  )

/** One `tools/call` on `/mcp`. */
export const mcp = (app: Running, token: string, tool: "describe" | "query" | "mutate", args: unknown) =>
  Effect.map(
    post(`${app.base}/mcp`, token, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: args } }), {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18"
    }),
    ({ status, text, headers }): Answer => {
      if (status !== 200) return { status, text, headers }
      const result = JSON.parse(text).result
      if (result?.isError) return { status, error: { code: result.structuredContent.code, message: result.structuredContent.message }, text, headers }
      return { status, value: result?.structuredContent, text, headers }
    }
  )

/** A snapshot on `/db/sync` small enough for one page: its records' entity and record. */
export const snapshot = (app: Running, token: string, payload: unknown) =>
  Effect.map(
    post(`${app.base}/db/sync`, token, `${JSON.stringify({ _tag: "Request", id: "1", tag: "SyncSnapshot", payload, headers: [] })}\n`, {
      "content-type": "application/ndjson"
    }),
    ({ status, text, headers }): Answer => {
      if (status !== 200) return { status, text, headers }
      const first = JSON.parse(text.split("\n")[0]!)
      return fromExit(status, text, headers, first._tag === "Chunk" ? { _tag: "Success", value: first.values[0] } : first.exit)
    }
  )

// Raw calls on each way in, as any HTTP client would make them, normalized to what a
// caller sees: the HTTP status, and either a public error (code, message, recovery),
// a success, or the HTTP layer's refusal body. The conformance suite compares them.
import { Effect } from "effect"
import type { Running } from "./app.js"

/** What one call answered, transport aside. */
export interface Answer {
  readonly status: number
  /** The public error, when the engine answered with one of the eight codes. */
  readonly error?: { readonly code: string; readonly message: string; readonly recovery?: string; readonly limit?: string }
  /** The success value (an RPC success, a tool result, the first sync message). */
  readonly value?: unknown
  /** The raw body text: what must never carry internals. */
  readonly text: string
  readonly headers: Headers
}

/** A payload given as JSON text, for shapes a test cannot build as values (JSON.stringify would overflow on them). */
export class RawJson {
  constructor(readonly text: string) {}
}

const encode = (payload: unknown): string => (payload instanceof RawJson ? payload.text : JSON.stringify(payload))

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

const recoveryOfCode: Readonly<Record<string, string>> = {
  invalid_query: "Correct the document; do not repeat it unchanged.",
  unknown_definition: "Rediscover the exact definition with describe.",
  invalid_input: "Correct the input from the schema published by describe.",
  inaccessible: "Stop, or ask the user for access.",
  catalog_changed: "Call describe and rebuild the request against the current catalog.",
  query_budget_exceeded: "Narrow the selection, path depth, filters or page size.",
  operation_rejected: "Present the public reason to the user; do not retry blindly.",
  invocation_conflict: "Fix the caller's state; use a new invocationId only for a new intent."
}

const fromExit = (status: number, text: string, headers: Headers, exit: any): Answer => {
  if (exit?._tag === "Success") return { status, value: exit.value, text, headers }
  const error = exit?.cause?._tag === "Fail" ? exit.cause.error : undefined
  if (error && codeOfTag[error._tag]) {
    const code = codeOfTag[error._tag]!
    return {
      status,
      error: { code, message: error.message, recovery: recoveryOfCode[code]!, ...(error.limit ? { limit: error.limit } : {}) },
      text,
      headers
    }
  }
  return { status, text, headers }
}

const send = (url: string, token: string, body: string, headers: Record<string, string>) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${token}`, ...headers }, body })
    return { status: response.status, text: await response.text(), headers: response.headers }
  })

/** One RPC on `/db/rpc` (JSON). */
export const rpc = (app: Running, token: string, tag: "Describe" | "Query" | "Mutate", payload: unknown) =>
  Effect.map(
    send(`${app.base}/db/rpc`, token, `{"_tag":"Request","id":"1","tag":"${tag}","payload":${encode(payload)},"headers":[]}`, { "content-type": "application/json" }),
    ({ status, text, headers }) => {
      if (status !== 200) return { status, text, headers } satisfies Answer
      const messages = JSON.parse(text) as Array<any>
      return fromExit(status, text, headers, messages.find((m) => m._tag === "Exit")?.exit)
    }
  )

/** One sync RPC on `/db/sync` (NDJSON); a stream answers with its first message. */
export const sync = (app: Running, token: string, tag: "SyncSnapshot" | "SyncChanges", payload: unknown) =>
  Effect.map(
    Effect.promise(async () => {
      const controller = new AbortController()
      const response = await fetch(`${app.base}/db/sync`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" },
        body: `{"_tag":"Request","id":"1","tag":"${tag}","payload":${encode(payload)},"headers":[]}\n`,
        signal: controller.signal
      })
      // A live stream never ends: read up to the first complete message, then hang up.
      const reader = response.body!.getReader()
      let text = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (value) text += new TextDecoder().decode(value)
        if (done || (response.status === 200 && text.includes("\n"))) break
      }
      controller.abort()
      return { status: response.status, text, headers: response.headers }
    }),
    ({ status, text, headers }): Answer => {
      if (status !== 200) return { status, text, headers }
      const first = JSON.parse(text.split("\n")[0]!)
      if (first._tag === "Chunk") return { status, value: first.values[0], text, headers }
      return fromExit(status, text, headers, first.exit)
    }
  )

/** One `tools/call` on `/mcp` (stateless JSON-RPC, no session). */
export const mcp = (app: Running, token: string, tool: string, args: unknown) =>
  Effect.map(
    send(
      `${app.base}/mcp`,
      token,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":${JSON.stringify(tool)},"arguments":${encode(args)}}}`,
      { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" }
    ),
    ({ status, text, headers }): Answer => {
      if (status !== 200) return { status, text, headers }
      const body = JSON.parse(text)
      const result = body.result
      if (result?.isError) {
        const { code, message, recovery, limit } = result.structuredContent
        return { status, error: { code, message, recovery, ...(limit ? { limit } : {}) }, text, headers }
      }
      return { status, value: result?.structuredContent ?? body.error, text, headers }
    }
  )

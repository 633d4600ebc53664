/**
 * Raw calls on each way in (`/db/rpc`, `/db/sync`, `/mcp`), as any HTTP client would make
 * them, normalized to what a caller sees: the HTTP status, and either a public error (code,
 * message, recovery), a success, or the HTTP layer's refusal body. For end-to-end tests of
 * any app served by `App`.
 */
import { PublicError } from "@cairn/domain/PublicError"
import { Effect, Option, Schema } from "effect"

/** A server to call: only its base URL matters here. */
export interface Target {
  readonly base: string
}

/** What one call answered, transport aside. */
export interface Answer {
  readonly status: number
  /** The public error, when the engine answered with one of the eight codes. */
  readonly error?: { readonly code: string; readonly message: string; readonly recovery?: string; readonly limit?: string }
  /** The success value (an RPC success, a tool result, the first sync message). */
  // Tests read the shape they asked for; the transport only promises JSON.
  readonly value?: any
  /** The raw body text: what must never carry internals. */
  readonly text: string
  readonly headers: Headers
}

/** A payload given as JSON text, for shapes a test cannot build as values (JSON.stringify would overflow on them). */
export class RawJson {
  constructor(readonly text: string) {}
}

const encode = (payload: unknown): string => (payload instanceof RawJson ? payload.text : JSON.stringify(payload))

/** The public error a failed RPC exit carries, as the domain decodes it (its code and recovery are the domain's). */
const decodePublicError = Schema.decodeUnknownOption(PublicError)
const fromExit = (status: number, text: string, headers: Headers, exit: any): Answer => {
  if (exit?._tag === "Success") return { status, value: exit.value, text, headers }
  const error = exit?.cause?._tag === "Fail" ? decodePublicError(exit.cause.error) : Option.none()
  if (Option.isNone(error)) return { status, text, headers }
  const { code, message, recovery } = error.value
  const limit = error.value._tag === "QueryBudgetExceeded" ? { limit: error.value.limit } : {}
  return { status, error: { code, message, recovery, ...limit }, text, headers }
}

const send = (url: string, token: string, body: string, headers: Record<string, string>) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${token}`, ...headers }, body })
    return { status: response.status, text: await response.text(), headers: response.headers }
  })

/** One RPC on `/db/rpc` (JSON). */
export const rpc = (app: Target, token: string, tag: "Describe" | "Query" | "Mutate", payload: unknown) =>
  Effect.map(
    send(`${app.base}/db/rpc`, token, `{"_tag":"Request","id":"1","tag":"${tag}","payload":${encode(payload)},"headers":[]}`, { "content-type": "application/json" }),
    ({ status, text, headers }) => {
      if (status !== 200) return { status, text, headers } satisfies Answer
      const messages = JSON.parse(text) as Array<any>
      return fromExit(status, text, headers, messages.find((m) => m._tag === "Exit")?.exit)
    }
  )

/** One sync RPC on `/db/sync` (NDJSON); a stream answers with its first message. */
export const sync = (app: Target, token: string, tag: "SyncSnapshot" | "SyncChanges", payload: unknown) =>
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
export const mcp = (app: Target, token: string, tool: string, args: unknown) =>
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

/**
 * The envelope of an @effect/rpc HTTP body, checked before the RPC layer reads it. The
 * RPC layer turns an unreadable body into a defect that echoes the parser's error (its
 * class name and text), and silently drops an NDJSON line without its newline; this
 * check answers both with a plain 400 saying what a request looks like instead, as it does a
 * body of more than one message (in either framing: one call per HTTP request). It looks
 * at the envelope only: payloads are the engine's to decode. The messages it parsed are handed
 * on (`ParsedEnvelope`), so the RPC layer does not parse the body again (a body near the size
 * limit costs ~17 ms of the event loop per parse).
 */
import { Context } from "effect"

export type Framing = "json" | "ndjson"

const clientTags = new Set(["Request", "Ack", "Interrupt", "Ping", "Eof"])
/** Request ids are decimal integers (the RPC layer reads them as bigints). */
const requestId = /^[0-9]{1,20}$/

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const messageProblem = (message: unknown, tags: ReadonlyArray<string> | undefined): string | undefined => {
  if (!isObject(message)) return "each message must be a JSON object"
  const tag = message["_tag"]
  if (typeof tag !== "string" || !clientTags.has(tag)) return `"_tag" must be one of ${[...clientTags].join(", ")}`
  if (tag === "Request") {
    if (typeof message["id"] !== "string" || !requestId.test(message["id"])) return '"id" must be a decimal integer string'
    if (typeof message["tag"] !== "string") return '"tag" must name the RPC'
    // The RPC layer answers a tag it does not serve with a defect frame; the caller's mistake is a plain 400.
    if (tags !== undefined && !tags.includes(message["tag"])) return `"tag" must be one of ${tags.join(", ")}`
    const headers = message["headers"]
    if (
      !Array.isArray(headers) ||
      headers.length > 64 ||
      !headers.every((h) => Array.isArray(h) && h.length === 2 && typeof h[0] === "string" && typeof h[1] === "string")
    ) {
      return '"headers" must be a list of [name, value] string pairs'
    }
  }
  if ((tag === "Ack" || tag === "Interrupt") && (typeof message["requestId"] !== "string" || !requestId.test(message["requestId"]))) {
    return '"requestId" must be a decimal integer string'
  }
  return undefined
}

/**
 * The request's RPC messages as the envelope check parsed them (what the serialization's own
 * `decode` gives for the body), provided by the `/db` gate to the exchange behind it.
 */
export class ParsedEnvelope extends Context.Tag("@cairn/server/RpcEnvelope/ParsedEnvelope")<ParsedEnvelope, ReadonlyArray<unknown>>() {}

/** A body's envelope: what is wrong with it, or its messages. */
export type Envelope = { readonly problem: string; readonly messages?: undefined } | { readonly problem?: undefined; readonly messages: ReadonlyArray<unknown> }

const parse = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/**
 * `body` read as an RPC request body in `framing`: its messages, or what is wrong with it.
 * With `tags` (the RPCs the route serves), a request naming another RPC is what is wrong.
 */
export const readEnvelope = (body: string, framing: Framing, tags?: ReadonlyArray<string>): Envelope => {
  const example =
    framing === "json"
      ? 'Send one JSON object: {"_tag":"Request","id":"1","tag":"<Rpc>","payload":{...},"headers":[]}.'
      : 'Send one NDJSON line: {"_tag":"Request","id":"1","tag":"<Rpc>","payload":{...},"headers":[]} ending with a newline.'
  if (framing === "json") {
    const parsed = parse(body)
    if (!parsed.ok) return { problem: `The request body is not valid JSON. ${example}` }
    const problem = messageProblem(parsed.value, tags)
    return problem === undefined ? { messages: [parsed.value] } : { problem: `The request body is not an RPC message: ${problem}. ${example}` }
  }
  if (!body.endsWith("\n")) return { problem: `The request body must end with a newline. ${example}` }
  // One message per body, as for JSON: every client sends each call in its own HTTP request, and
  // a body of thousands of lines would run thousands of calls (each answer buffered unpaced) for
  // one request, holding the event loop for seconds.
  if (body.indexOf("\n") !== body.length - 1) {
    return { problem: `The request body holds more than one line; send one RPC message per HTTP request. ${example}` }
  }
  const parsed = parse(body.slice(0, -1))
  if (!parsed.ok) return { problem: `The request body is not valid JSON. ${example}` }
  const problem = messageProblem(parsed.value, tags)
  return problem === undefined ? { messages: [parsed.value] } : { problem: `The request body is not an RPC message: ${problem}. ${example}` }
}

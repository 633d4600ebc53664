/**
 * The one redaction rule for everything that leaves the process for an operator: log lines
 * (message, annotations, cause), span attributes and span failures, and error reports. It
 * removes bearer tokens and JWTs, the values of fields that carry credentials, claims, queries
 * or application payloads, and the quoted or `actual …` values that schema and driver errors
 * echo from their input. Names, ids Cairn assigns, codes and numbers of its own stay readable.
 */
import { Cause, HashMap, Logger } from "effect"

export const redacted = "[redacted]"

/** Keys whose values are never shown, whatever they hold (matched case-insensitively, anywhere in the key). */
const sensitiveKey = /authorization|token|secret|password|claim|cookie|payload|input|output|query|where|value|record|title|body|args|arguments/i

/** Keys that look sensitive but name Cairn's own safe identifiers. */
const safeKeys = new Set(["requestId", "invocationId", "traceId", "spanId", "catalogToken"])


const patterns: ReadonlyArray<readonly [RegExp, string]> = [
  // A bearer credential in any header echo or message.
  [/\b(Bearer|DPoP)\s+[A-Za-z0-9\-._~+/]+=*/gi, `$1 ${redacted}`],
  // A JWT (three base64url segments, the first a JSON header).
  [/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g, redacted],
  // What a schema error elsewhere says it received (`actual "…"`), up to the next alternative or the end of the line.
  [/\bactual\s+(?:(?! or Expected )[^\n])*/g, `actual ${redacted}`],
  // Quoted literals (JSON strings, SQL string literals) as errors echo them.
  [/"(?:[^"\\\n]|\\.){1,}"/g, `"${redacted}"`],
  [/'(?:[^'\\\n]|\\.){1,}'/g, `'${redacted}'`]
]

/**
 * The rule for a value a caller sent, where a schema error would quote it: its kind and size
 * only ("a string of 12 characters", "a number"), so error bodies and the logs that quote them
 * never carry a payload value.
 */
export const standIn = (u: unknown): unknown => {
  const description = Array.isArray(u)
    ? `an array of ${u.length} ${u.length === 1 ? "element" : "elements"}`
    : typeof u === "string"
      ? `a string of ${u.length} ${u.length === 1 ? "character" : "characters"}`
      : u === null
        ? "null"
        : u === undefined
          ? "nothing"
          : typeof u === "object"
            ? "an object"
            : `a ${typeof u}`
  return { toString: () => description }
}

/**
 * Something each pattern needs to match (a bearer scheme, a JWT's `eyJ`, `actual`, a quote);
 * text without any is returned as is after one scan instead of five (most log fields: ids,
 * routes, numbers as text).
 */
const trigger = /bearer|dpop|eyJ|actual|["']/i

/** The rule applied to free text. */
export const text = (input: string): string =>
  trigger.test(input) ? patterns.reduce((s, [pattern, replacement]) => s.replace(pattern, replacement), input) : input

/** The rule applied to one key/value pair (a log annotation, a span attribute). */
export const field = (key: string, value: unknown): unknown => {
  if (!safeKeys.has(key) && sensitiveKey.test(key)) return redacted
  if (typeof value === "string") return text(value)
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value === undefined || value === null) return value
  // Structured values (objects, arrays) are payload-shaped: shown as their kind only.
  return redacted
}

/** The rule applied to a cause: its rendering, redacted, as a single defect (stack frames kept, values gone). */
export const cause = <E>(input: Cause.Cause<E>): Cause.Cause<unknown> => {
  if (Cause.isEmpty(input) || Cause.isInterruptedOnly(input)) return input
  const error = new Error(text(Cause.pretty(input, { renderErrorCause: true })))
  error.name = "Redacted"
  error.stack = error.message
  return Cause.die(error)
}

const messageOf = (message: unknown): unknown =>
  Array.isArray(message)
    ? message.map(messageOf)
    : typeof message === "string"
      ? text(message)
      : message instanceof Error
        ? `${message.name}: ${text(message.message)}`
        : typeof message === "object" && message !== null
          ? redacted
          : message

/** `logger` with the rule applied to every message, annotation and cause before it formats them. */
export const logger = <Message, Output>(inner: Logger.Logger<Message, Output>): Logger.Logger<Message, Output> =>
  Logger.mapInputOptions(inner, (options) => ({
    ...options,
    message: messageOf(options.message) as Message,
    cause: cause(options.cause) as Cause.Cause<unknown>,
    annotations: HashMap.map(options.annotations, (value, key) => field(key, value))
  }))

/**
 * The operator's log formats (`CAIRN_LOG_FORMAT`): Effect's pretty lines, JSON (one object
 * per line) or logfmt, every line passed through the one redaction rule (`Redaction`).
 *
 * JSON and logfmt are what production runs, one line per request at least, so they format
 * a line directly: the redacted values go straight into the output, where
 * `Redaction.logger(Logger.jsonLogger)` first rebuilds the annotations as a new map and then
 * walks it again (measured: ~10 µs of a line's ~20). The output is the same, byte for byte
 * (`LogFormat.test.ts` compares them); lines whose message is not plain text, or that carry
 * a cause, take that general path.
 */
import * as Redaction from "@cairn/domain/Redaction"
import { Cause, FiberId, List, Logger } from "effect"

export type LogFormat = "pretty" | "json" | "logfmt"

type Options = Logger.Logger.Options<unknown>

/** The text of a line the direct formats can write (plain text, as `Effect.log` passes it a one-element list; no cause). */
const plainText = (options: Options): string | undefined => {
  if (!Cause.isEmpty(options.cause)) return undefined
  const message = Array.isArray(options.message) && options.message.length === 1 ? options.message[0] : options.message
  return typeof message === "string" ? message : undefined
}

/** A redacted annotation as Effect's structured logger renders it (`field` leaves only primitives). */
const structured = (value: unknown): unknown => (typeof value === "bigint" ? String(value) : value)

const jsonGeneral = Redaction.logger(Logger.jsonLogger)

const jsonLine = Logger.make((options): string => {
  const message = plainText(options)
  if (message === undefined) return jsonGeneral.log(options)
  const annotations: Record<string, unknown> = {}
  for (const [key, value] of options.annotations) annotations[key] = structured(Redaction.field(key, value))
  const spans: Record<string, number> = {}
  const now = options.date.getTime()
  for (const span of options.spans) spans[span.label] = now - span.startTime
  return JSON.stringify({
    message: Redaction.text(message),
    logLevel: options.logLevel.label,
    timestamp: options.date.toISOString(),
    annotations,
    spans,
    fiberId: FiberId.threadName(options.fiberId)
  })
})

/** logfmt's value rule: bare when it has no space, quote or `=`, else a JSON string. */
const textOnly = /^[^\s"=]*$/
const logfmtValue = (value: string) => (textOnly.test(value) ? value : JSON.stringify(value))
const logfmtLabel = (label: string) => label.replace(/[\s="]/g, "_")

const logfmtGeneral = Redaction.logger(Logger.logfmtLogger)

const logfmtLine = Logger.make((options): string => {
  const message = plainText(options)
  if (message === undefined) return logfmtGeneral.log(options)
  let out = `timestamp=${logfmtValue(options.date.toISOString())} level=${logfmtValue(options.logLevel.label)}`
  out += ` fiber=${logfmtValue(FiberId.threadName(options.fiberId))} message=${logfmtValue(Redaction.text(message))}`
  const now = options.date.getTime()
  for (const span of List.toArray(options.spans)) out += ` ${logfmtLabel(span.label)}=${now - span.startTime}ms`
  for (const [key, value] of options.annotations) {
    const shown = Redaction.field(key, value)
    out += ` ${logfmtLabel(key)}=${logfmtValue(typeof shown === "string" ? shown : String(shown))}`
  }
  return out
})

/** The line formatter of `format`, before it is printed (tests compare these). */
export const lineFormatter = (format: "json" | "logfmt"): Logger.Logger<unknown, string> => (format === "json" ? jsonLine : logfmtLine)

/** A logger in `format`, every line passed through the one redaction rule first. */
export const loggerFor = (format: LogFormat): Logger.Logger<unknown, void> =>
  format === "pretty" ? Redaction.logger(Logger.prettyLogger()) : Logger.withConsoleLog(lineFormatter(format))

/**
 * The operator's log formats (`CAIRN_LOG_FORMAT`): Effect's pretty lines, JSON (one object
 * per line) or logfmt (Effect's `jsonLogger` and `logfmtLogger`), every line passed through
 * the one redaction rule (`Redaction`) first.
 */
import * as Redaction from "@cairn/domain/Redaction"
import { Logger } from "effect"

export type LogFormat = "pretty" | "json" | "logfmt"

/** A logger in `format`, every line passed through the one redaction rule first. */
export const loggerFor = (format: LogFormat): Logger.Logger<unknown, void> =>
  format === "pretty"
    ? Redaction.logger(Logger.prettyLogger())
    : Logger.withConsoleLog(Redaction.logger(format === "json" ? Logger.jsonLogger : Logger.logfmtLogger))

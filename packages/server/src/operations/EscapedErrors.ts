/**
 * The last guard of a serving process: an error that escaped every handler (an `error` event
 * nobody listens to, a throw from a library's callback) would exit the process and take every
 * tenant with it. Entry points install this guard (`launch` does): such an error is logged as
 * a defect and counted (`cairn_escaped_errors_total`, on `/metrics`), and the process keeps
 * serving. Every count is a bug to fix where the stream or callback was made.
 */
import { EventEmitter } from "node:events"
import { Cause, Effect, Layer, Metric, Runtime } from "effect"

export const escapedErrors = Metric.counter("cairn_escaped_errors_total", {
  description: "Errors that escaped every handler (defects): logged and counted instead of exiting the process"
})

export const logWriteErrors = Metric.counter("cairn_log_write_errors_total", {
  description: "Log lines that could not be written (standard output or error closed by its reader)",
  incremental: true
})

/** Installs the guard for the layer's lifetime. */
export const EscapedErrors = Layer.scopedDiscard(
  Effect.gen(function* () {
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const report = (origin: "uncaughtException" | "unhandledRejection") => (error: unknown) => {
      runFork(
        Effect.zipRight(
          Metric.increment(Metric.tagged(escapedErrors, "origin", origin)),
          Effect.logError("An error escaped its handler (a defect): logged, counted, and the process keeps serving", Cause.die(error))
        )
      )
    }
    const onException = report("uncaughtException")
    const onRejection = report("unhandledRejection")
    // The log's own streams: when their reader goes away (a log collector died, a parent exited), each
    // write fails with EPIPE. Unheard, that failure escapes; reported, the report is one more failing
    // write: the process would spin on its own logs. Counted here, never logged.
    const onLogStreamError = () => logWriteErrors.unsafeUpdate(1, [])
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        process.on("uncaughtException", onException)
        process.on("unhandledRejection", onRejection)
        process.stdout.on("error", onLogStreamError)
        process.stderr.on("error", onLogStreamError)
      }),
      () =>
        Effect.sync(() => {
          process.off("uncaughtException", onException)
          process.off("unhandledRejection", onRejection)
          process.stdout.off("error", onLogStreamError)
          process.stderr.off("error", onLogStreamError)
        })
    )
  })
)

/** What the test hook fires: an `error` event that nobody listens to, outside any fiber (as a stray stream's would be). */
export const escapeOnce = () =>
  setImmediate(() => {
    new EventEmitter().emit("error", new Error("test hook: an error event nobody listens to"))
  })

/**
 * `Effect.logInfo(message).pipe(Effect.annotateLogs(fields))` for a line logged once and
 * done with (the front's request line): every logger receives exactly the options that
 * would hand it, but the fields go into one copy of the fiber's annotations instead of a
 * scoped annotation context, which sets a fiber ref twice, each time copying all of the
 * fiber's refs (measured: ~10 µs of a request line's ~20). Fields left `undefined` are
 * omitted.
 */
import { Cause, Effect, FiberRef, HashMap, HashSet, Inspectable, LogLevel } from "effect"

export const logInfoWith = (message: string, fields: Readonly<Record<string, unknown>>, at: Date): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    if (LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Info)) return Effect.void
    const loggers = fiber.getFiberRef(FiberRef.currentLoggers)
    if (HashSet.size(loggers) === 0) return Effect.void
    const annotations = HashMap.mutate(fiber.getFiberRef(FiberRef.currentLogAnnotations), (map) => {
      for (const key in fields) if (fields[key] !== undefined) HashMap.set(map, key, fields[key])
    })
    const context = fiber.getFiberRefs()
    const options = {
      fiberId: fiber.id(),
      logLevel: LogLevel.Info,
      // As `Effect.logInfo` passes its message: a list of one.
      message: [message],
      cause: Cause.empty,
      context,
      spans: fiber.getFiberRef(FiberRef.currentLogSpan),
      annotations,
      date: at
    }
    Inspectable.withRedactableContext(context, () => {
      for (const logger of loggers) logger.log(options)
    })
    return Effect.void
  })

import { describe, expect, it } from "@effect/vitest"
import * as Redaction from "@cairn/domain/Redaction"
import { Cause, Effect, FiberId, HashMap, List, Logger, LogLevel, LogSpan } from "effect"
import * as fc from "fast-check"
import { lineFormatter } from "@cairn/server/LogFormat"
import { logInfoWith } from "../src/internal/logInfoWith.js"

/** Values as logs carry them, including what redaction must hide (tokens, quotes, payload-shaped values). */
const value = fc.oneof(
  fc.string(),
  fc.constantFrom("Bearer abc.def-ghi", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", 'say "hi" = x', "a b", "", "#12"),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.bigInt(),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
  fc.array(fc.integer(), { maxLength: 3 })
)
const key = fc.oneof(fc.string({ minLength: 1 }), fc.constantFrom("requestId", "token", "route", "status", "a key=\"x\"", "payload"))

const options = fc
  .record({
    text: fc.oneof(fc.string(), fc.constantFrom("POST /db/rpc 200 3ms", 'refused "Bearer abc"', "a=b c")),
    // `Effect.log` passes its messages as a list.
    listed: fc.boolean(),
    annotations: fc.array(fc.tuple(key, value), { maxLength: 6 }),
    spans: fc.array(fc.tuple(fc.constantFrom("span", "a span", "x=y"), fc.nat(1000)), { maxLength: 2 }),
    level: fc.constantFrom(LogLevel.Info, LogLevel.Warning, LogLevel.Error),
    fiber: fc.nat(10_000),
    at: fc.integer({ min: 0, max: 4_000_000_000_000 })
  })
  .map(({ text, listed, annotations, spans, level, fiber, at }): Logger.Logger.Options<unknown> => ({
    fiberId: FiberId.make(fiber, at),
    logLevel: level,
    message: listed ? [text] : text,
    cause: Cause.empty,
    context: undefined as never,
    spans: List.fromIterable(spans.map(([label, ago]) => LogSpan.make(label, at - ago))),
    annotations: HashMap.fromIterable(annotations),
    date: new Date(at)
  }))

describe("log formats", () => {
  for (const [format, general] of [
    ["json", Redaction.logger(Logger.jsonLogger)],
    ["logfmt", Redaction.logger(Logger.logfmtLogger)]
  ] as const) {
    it(`formats ${format} lines directly, byte for byte as the redacted Effect ${format} logger does`, () => {
      fc.assert(
        fc.property(options, (input) => {
          expect(lineFormatter(format).log(input)).toBe(general.log(input))
        }),
        { numRuns: 500 }
      )
    })

    it(`hands ${format} lines it does not format directly (a cause, a structured message) to that logger`, () => {
      const base = fc.sample(options, { numRuns: 1, seed: 7 })[0]!
      for (const input of [
        { ...base, cause: Cause.fail(new Error('failed on "Bearer abc.def"')) },
        { ...base, message: ["two", "parts"] },
        { ...base, message: { title: "secret" } }
      ]) {
        expect(lineFormatter(format).log(input)).toBe(general.log(input))
      }
      expect(lineFormatter(format).log({ ...base, message: { title: "secret" } })).not.toContain("secret")
    })
  }

  it.effect("logInfoWith hands every logger what logInfo under annotateLogs would", () =>
    Effect.gen(function* () {
      const seen: Array<Logger.Logger.Options<unknown>> = []
      const capture = Logger.make((options) => void seen.push(options))
      const fields = { method: "POST", route: "/db/rpc", status: 200, durationMs: 4, traceId: "ab", invocationId: undefined, outcome: "committed" }
      const at = new Date(1_700_000_000_000)
      const both = Effect.gen(function* () {
        yield* Effect.logInfo("POST /db/rpc 200 4ms").pipe(Effect.annotateLogs({ method: "POST", route: "/db/rpc", status: 200, durationMs: 4, traceId: "ab", outcome: "committed" }))
        yield* logInfoWith("POST /db/rpc 200 4ms", fields, at)
      }).pipe(Effect.annotateLogs("requestId", "r1"), Effect.withLogSpan("outer"))
      yield* both.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
      expect(seen).toHaveLength(2)
      const [logged, direct] = seen as [Logger.Logger.Options<unknown>, Logger.Logger.Options<unknown>]
      expect(direct.message).toEqual(logged.message)
      expect(direct.logLevel).toBe(logged.logLevel)
      expect(direct.date).toBe(at)
      expect(Object.fromEntries(direct.annotations)).toEqual(Object.fromEntries(logged.annotations))
      expect(Object.fromEntries(direct.annotations)).toEqual({ ...fields, invocationId: undefined, requestId: "r1" })
      expect(HashMap.has(direct.annotations, "invocationId")).toBe(false)
      expect(List.toArray(direct.spans).map((s) => s.label)).toEqual(["outer"])
      expect(direct.fiberId).toEqual(logged.fiberId)

      // Dropped by the operator's level: no logger is called.
      yield* logInfoWith("dropped", fields, at).pipe(Logger.withMinimumLogLevel(LogLevel.Warning), Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
      expect(seen).toHaveLength(2)
    })
  )
})

// The one redaction rule on what it is given: free text, log fields, causes and whole log lines
// (through a real Effect logger). Planted values must not survive; Cairn's own safe ids must.
import { assert, describe, it } from "@effect/vitest"
import * as Redaction from "@cairn/domain/Redaction"
import { Cause, Effect, Logger, LogLevel } from "effect"

const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

describe("Redaction", () => {
  it("text: bearer tokens, JWTs, quoted literals and schema `actual` values go; plain words stay", () => {
    const out = Redaction.text(`Bearer abc.def-ghi sent ${jwt}; title "Secret launch" and 'secret-sql'; Expected string, actual {"a":1}`)
    for (const gone of ["abc.def-ghi", jwt, "Secret launch", "secret-sql", `{"a":1}`]) assert.notInclude(out, gone)
    assert.include(out, "Expected string, actual [redacted]")
    assert.include(out, "sent")
  })

  it("text: each pattern applies whatever the case of its trigger; text with no trigger is returned as is", () => {
    for (const sent of [`bearer abc.def`, `DPOP abc.def`, `dpop abc`]) assert.notInclude(Redaction.text(`sent ${sent} here`), "abc")
    assert.strictEqual(Redaction.text(`Expected string, actual 42`), "Expected string, actual [redacted]")
    assert.strictEqual(Redaction.text(`title 'x'`), `title '[redacted]'`)
    for (const plain of ["POST", "/db/rpc", "0123456789abcdef0123456789abcdef", "019a5c3e-7b2a-7c4e-9f00-0123456789ab", "3ms", "Actually", ""]) {
      assert.strictEqual(Redaction.text(plain), plain)
    }
  })

  it("field: sensitive keys and structured values are redacted; safe ids and numbers are kept", () => {
    assert.strictEqual(Redaction.field("authorization", "x"), Redaction.redacted)
    assert.strictEqual(Redaction.field("claims", "x"), Redaction.redacted)
    assert.strictEqual(Redaction.field("input", "x"), Redaction.redacted)
    assert.strictEqual(Redaction.field("url.query", "a=1"), Redaction.redacted)
    assert.strictEqual(Redaction.field("anything", { title: "x" }), Redaction.redacted)
    assert.strictEqual(Redaction.field("requestId", "r-1"), "r-1")
    assert.strictEqual(Redaction.field("invocationId", "0190"), "0190")
    assert.strictEqual(Redaction.field("status", 200), 200)
  })

  it("standIn: a value is described by kind and size, never shown", () => {
    assert.strictEqual(String(Redaction.standIn("secret")), "a string of 6 characters")
    assert.strictEqual(String(Redaction.standIn([1, 2])), "an array of 2 elements")
    assert.strictEqual(String(Redaction.standIn({ secret: 1 })), "an object")
    assert.strictEqual(String(Redaction.standIn(42)), "a number")
  })

  it.effect("logger: a defect whose message carries a payload value is logged without it", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const capture = Logger.map(Redaction.logger(Logger.jsonLogger), (line) => void lines.push(line))
      yield* Effect.logError(`handler failed for "Secret title 42"`, Cause.die(new Error(`Task "Secret title 42" broke with ${jwt}`))).pipe(
        Effect.annotateLogs({ requestId: "req-1", token: jwt, payload: "Secret title 42" }),
        Effect.provide(Logger.replace(Logger.defaultLogger, capture)),
        Logger.withMinimumLogLevel(LogLevel.Info)
      )
      assert.strictEqual(lines.length, 1)
      const line = lines[0]!
      assert.notInclude(line, "Secret title 42")
      assert.notInclude(line, jwt)
      assert.include(line, "req-1")
      assert.include(line, "handler failed")
    }))
})

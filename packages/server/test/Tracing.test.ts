// The exporting tracer's wrapper: attributes and failures pass the redaction rule before the
// exporter sees them, and head sampling drops a whole trace (root and children) at ratio 0.
import { assert, describe, it } from "@effect/vitest"
import { redacting } from "@cairn/server/operations/Tracing"
import { Cause, Effect, Exit, Tracer } from "effect"

interface Exported {
  readonly name: string
  readonly attributes: ReadonlyMap<string, unknown>
  readonly exit: Exit.Exit<unknown, unknown>
}

/** Effect's own tracer, recording every span that ends (what an exporter would receive). */
const recording = Effect.map(Effect.tracer, (native) => {
  const exported: Array<Exported> = []
  const tracer = Tracer.make({
    span(...args) {
      const span = native.span(...args)
      const end = span.end.bind(span)
      ;(span as { end: Tracer.Span["end"] }).end = (endTime, exit) => {
        exported.push({ name: span.name, attributes: new Map(span.attributes), exit })
        end(endTime, exit)
      }
      return span
    },
    context: native.context
  })
  return { tracer, exported }
})

const work = Effect.fail(new Error(`title "Secret launch" rejected`)).pipe(
  Effect.withSpan("child", { attributes: { "cairn.payload": "Secret launch", "http.route": "/db/rpc", count: 3 } }),
  Effect.withSpan("root", { attributes: { authorization: "Bearer abc" } }),
  Effect.exit
)

describe("Tracing.redacting", () => {
  it.effect("redacts attributes and failures before export", () =>
    Effect.gen(function* () {
      const { tracer, exported } = yield* recording
      yield* Effect.withTracer(work, redacting(tracer, 1))
      assert.deepStrictEqual(exported.map((s) => s.name), ["child", "root"])
      const child = exported[0]!
      assert.strictEqual(child.attributes.get("cairn.payload"), "[redacted]")
      assert.strictEqual(child.attributes.get("http.route"), "/db/rpc")
      assert.strictEqual(child.attributes.get("count"), 3)
      assert.strictEqual(exported[1]!.attributes.get("authorization"), "[redacted]")
      assert.isTrue(Exit.isFailure(child.exit))
      const rendered = Exit.isFailure(child.exit) ? Cause.pretty(child.exit.cause) : ""
      assert.include(rendered, "rejected")
      assert.notInclude(rendered, "Secret launch")
    }))

  it.effect("at ratio 0 nothing of a trace is exported", () =>
    Effect.gen(function* () {
      const { tracer, exported } = yield* recording
      yield* Effect.withTracer(work, redacting(tracer, 0))
      assert.deepStrictEqual(exported, [])
    }))
})

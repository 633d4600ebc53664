// The writer's refs restorer (`refsRestorer` in Writer.ts) calls the runtime fiber's own
// `setFiberRefs`, which is not in Effect's public type, and falls back to `Effect.setFiberRefs`.
// Against that public path: the method is there, and after a handler changed the fiber's refs
// (annotations, spans, services, refs of its own) both put back the same value of every ref the
// fiber had; the one known difference (a ref first set after the capture) is pinned.
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, FiberRef, FiberRefs, HashSet, Logger, LogLevel } from "effect"

class Service extends Context.Tag("test/Service")<Service, string>() {}

const refs = Array.from({ length: 8 }, (_, i) => FiberRef.unsafeMake(i))
const later = FiberRef.unsafeMake("initial")

/** What a handler does to its fiber's refs. */
const handler = Effect.gen(function* () {
  for (const ref of refs) yield* FiberRef.update(ref, (n) => n + 100)
  yield* FiberRef.set(later, "set by the handler")
  yield* FiberRef.update(FiberRef.currentLogAnnotations, (a) => a)
  yield* Effect.annotateLogsScoped({ leaked: "yes" })
  yield* FiberRef.set(FiberRef.currentMinimumLogLevel, LogLevel.Debug)
})

/**
 * After `restore` put back the refs captured before the handler ran: whether every captured ref
 * has its captured value again, how many there were, and `later`'s value.
 */
const afterRestore = (restore: (captured: FiberRefs.FiberRefs) => Effect.Effect<void>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const captured = yield* Effect.getFiberRefs
      yield* handler
      yield* restore(captured)
      const now = yield* Effect.getFiberRefs
      const all = [...HashSet.toValues(FiberRefs.fiberRefs(captured))]
      const differing = all.filter((ref) => FiberRefs.getOrDefault(now, ref) !== FiberRefs.getOrDefault(captured, ref))
      return { refs: all.length, differing: differing.length, later: yield* FiberRef.get(later) }
    })
  ).pipe(
    Effect.annotateLogs({ requestId: "r1" }),
    Effect.withLogSpan("group"),
    Logger.withMinimumLogLevel(LogLevel.Warning),
    Effect.provideService(Service, "s"),
    (e) => refs.reduce((acc, ref, i) => Effect.locally(acc, ref, i + 1), e)
  )

const direct = (captured: FiberRefs.FiberRefs) =>
  Effect.withFiberRuntime<void>((fiber) => {
    const set = (fiber as unknown as { readonly setFiberRefs?: (refs: FiberRefs.FiberRefs) => void }).setFiberRefs
    assert.strictEqual(typeof set, "function", "FiberRuntime.setFiberRefs is gone: refsRestorer now takes its fallback")
    set!.call(fiber, captured)
    return Effect.void
  })

describe("refsRestorer's direct path against Effect.setFiberRefs", () => {
  it.effect("puts back the same value of every ref the fiber had", () =>
    Effect.gen(function* () {
      const mine = yield* afterRestore(direct)
      const theirs = yield* afterRestore(Effect.setFiberRefs)
      assert.isAbove(mine.refs, refs.length)
      assert.strictEqual(mine.differing, 0)
      assert.strictEqual(theirs.differing, 0)
    }))

  it.effect("known difference: a ref first set by the handler goes back to its initial value (as on a fresh fiber), where Effect.setFiberRefs leaves it", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* afterRestore(direct)).later, "initial")
      assert.strictEqual((yield* afterRestore(Effect.setFiberRefs)).later, "set by the handler")
    }))
})

/**
 * Spans on the per-request and per-operation hot paths, only when a tracer is configured. Without one, Effect's
 * built-in tracer still makes every span (clock reads, a span object, a copy of the fiber's
 * context to carry it): ~25 µs each on the writer's path, for spans nobody exports.
 */
import { Context, DefaultServices, Effect, Tracer } from "effect"

/** Effect's own tracer, in place whenever the deployment configured none. */
const builtIn: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** `Effect.withSpan(name, options)` (no captured stack) when a tracer is configured; else the effect as is. */
export const hotSpan =
  (name: string, options?: Omit<Tracer.SpanOptions, "captureStackTrace">) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tracerWith((tracer) => (tracer === builtIn ? self : Effect.withSpan(self, name, { ...options, captureStackTrace: false })))

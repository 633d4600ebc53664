/**
 * Deadlines of many keys served by one fiber: what the store uses instead of a sleeping fiber per
 * open database (each kept a fiber, its timer and the finished fiber that forked it: ~10 KiB of
 * heap per database, most of them idle).
 */
import { Cause, Effect, type Scope } from "effect"
import { currentElapsedMillis } from "@cairn/domain/Elapsed"

export interface Deadlines<K> {
  /**
   * Runs `onDue(key)` once the clock reaches `at` (in `@cairn/domain/Elapsed` milliseconds), replacing the key's earlier deadline. Every key of
   * one queue is armed for `now + its queue's delay`: deadlines come in order, so the queue is a
   * list in arming order (re-arming moves the key to its end), and the fiber sleeps until its head's.
   */
  readonly arm: (key: K, at: number) => void
  /** Drops the key's deadline, if any. */
  readonly disarm: (key: K) => void
  /** How many keys are armed (for tests: a closed database leaves none behind). */
  readonly size: () => number
}

/**
 * A queue of deadlines and its fiber, interrupted when the scope closes. `onDue` runs in that fiber,
 * uninterruptibly: it must not wait long (fork a long job), and should check that what it acts on
 * is still due (a key is disarmed or re-armed by its owner, never by the queue).
 */
export const make = <K>(onDue: (key: K) => Effect.Effect<void>): Effect.Effect<Deadlines<K>, never, Scope.Scope> =>
  Effect.gen(function* () {
    /** Keys and their deadlines, in arming order: the earliest first. */
    const queue = new Map<K, number>()
    /** Set while the queue is empty and the fiber waits for a key. */
    let wake: (() => void) | undefined
    const idle = Effect.async<void>((resume) => {
      wake = () => resume(Effect.void)
      return Effect.sync(() => {
        wake = undefined
      })
    })
    const next: Effect.Effect<void> = Effect.suspend(() => {
      const head = queue.entries().next()
      if (head.done === true) return idle
      const [key, at] = head.value
      return Effect.flatMap(currentElapsedMillis, (now) => {
        // Woken for a deadline since moved or dropped, the loop looks at the new head.
        if (at > now) return Effect.sleep(at - now)
        queue.delete(key)
        return Effect.uninterruptible(
          // One key's failure is logged; the others' deadlines still come.
          Effect.catchAllCause(onDue(key), (cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError("deadline failed", cause)))
        )
      })
    })
    // Interruptible whatever forked it (a fork inherits a finalizer's uninterruptibility).
    yield* Effect.forkScoped(Effect.interruptible(Effect.forever(next)))
    return {
      arm: (key, at) => {
        queue.delete(key)
        queue.set(key, at)
        if (wake !== undefined) {
          const w = wake
          wake = undefined
          w()
        }
      },
      disarm: (key) => void queue.delete(key),
      size: () => queue.size
    }
  })

/**
 * Elapsed time, for deadlines and durations: the clock's monotonic reading, in milliseconds.
 *
 * The wall clock (`Clock.currentTimeMillis`, `Date.now()`) can be set back or forward while a
 * server runs (an NTP step, a virtual machine resumed): a deadline taken from it then comes an hour
 * late or at once, and a duration comes out negative. Effect's default clock reads its nanoseconds
 * from `process.hrtime`, which only moves forward; the test clock's follow its adjustments. Wall time
 * stays the right reading for what is compared with other machines' (token expiry, commit times).
 */
import { type Clock, Effect } from "effect"

/** The clock's monotonic reading in milliseconds (not a date: only differences mean anything). */
export const elapsedMillis = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos()) / 1_000_000

/** `elapsedMillis` of the fiber's clock. */
export const currentElapsedMillis: Effect.Effect<number> = Effect.clockWith((clock) => Effect.sync(() => elapsedMillis(clock)))

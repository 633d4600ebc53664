/**
 * A check whose "all is well" holds for the rest of the event loop's turn: the requests that
 * arrive together (a group commit answers hundreds at once, and they come straight back) share
 * one run of it instead of one each. A problem is never remembered: every call after one runs
 * the check again.
 */
export const okPerTurn = <E>(check: () => E | undefined): (() => E | undefined) => {
  let ok = false
  const expire = () => {
    ok = false
  }
  return () => {
    if (ok) return undefined
    const problem = check()
    if (problem === undefined) {
      ok = true
      // The check phase of this turn: whatever happens after it (I/O, timers, another request) checks again.
      setImmediate(expire).unref()
    }
    return problem
  }
}

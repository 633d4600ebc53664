import { assert, describe, it } from "@effect/vitest"
import { okPerTurn } from "../src/internal/okPerTurn.js"

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("okPerTurn", () => {
  it("an ok answer holds until the event loop's next check phase, then the check runs again", async () => {
    let runs = 0
    let problem: string | undefined
    const check = okPerTurn(() => {
      runs += 1
      return problem
    })
    assert.isUndefined(check())
    assert.isUndefined(check())
    assert.strictEqual(runs, 1, "requests of one turn share one run")
    await nextTurn()
    problem = "gone"
    assert.strictEqual(check(), "gone", "the next turn runs the check again and sees the problem")
    assert.strictEqual(runs, 2)
  })

  it("a problem is never remembered: every call checks again", async () => {
    let runs = 0
    let problem: string | undefined = "gone"
    const check = okPerTurn(() => {
      runs += 1
      return problem
    })
    assert.strictEqual(check(), "gone")
    assert.strictEqual(check(), "gone")
    assert.strictEqual(runs, 2)
    problem = undefined
    assert.isUndefined(check())
    assert.isUndefined(check())
    assert.strictEqual(runs, 3)
  })
})

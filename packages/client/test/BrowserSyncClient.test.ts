// The browser client's pure parts, in Node: how pending intents overlay the synced records, and the
// position comparison that decides when a committed intent's overlay may go (checked against the
// store's own encoding of commit positions, which the client otherwise treats as opaque).
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { encode } from "@cairn/store/Position"
import { overlay, pendingId } from "@cairn/client/BrowserSyncClient"
import { type OutboxEntry, positionReached } from "@cairn/client/IndexedDbStore"

const entry = (invocationId: string, optimistic: OutboxEntry["optimistic"], status: OutboxEntry["status"] = "pending"): OutboxEntry => ({
  invocationId,
  request: { operation: { kind: "operation", owner: { kind: "entity", name: optimistic.entity }, name: "x" }, input: {}, invocationId },
  optimistic,
  createdAt: 0,
  status
})

describe("BrowserSyncClient.overlay", () => {
  const records = [
    { id: "t1", record: { id: "t1", title: "one", status: "open" } },
    { id: "t2", record: { id: "t2", title: "two", status: "open" } }
  ]

  it("shows pending creates and updates of the entity, marks them pending, and ignores rejected and other entities' intents", () => {
    const rows = overlay("Task", records, [
      entry("a", { _tag: "Create", entity: "Task", record: { title: "new", status: "open" } }),
      entry("b", { _tag: "Update", entity: "Task", id: "t2", patch: { status: "done" } }),
      entry("c", { _tag: "Update", entity: "Task", id: "t1", patch: { status: "done" } }, "rejected"),
      entry("d", { _tag: "Create", entity: "Project", record: { name: "p" } }),
      entry("e", { _tag: "Update", entity: "Task", id: "gone", patch: { status: "done" } })
    ])
    assert.deepStrictEqual(rows, [
      { id: "t1", record: { id: "t1", title: "one", status: "open" }, pending: false },
      { id: "t2", record: { id: "t2", title: "two", status: "done" }, pending: true },
      { id: pendingId("a"), record: { title: "new", status: "open", id: pendingId("a") }, pending: true }
    ])
  })

  it("keeps a committed intent's overlay until the records include it", () => {
    const rows = overlay("Task", records, [entry("a", { _tag: "Update", entity: "Task", id: "t1", patch: { title: "renamed" } }, "committed")])
    assert.strictEqual(rows[0]!.record["title"], "renamed")
    assert.isTrue(rows[0]!.pending)
  })
})

describe("IndexedDbStore.positionReached", () => {
  it("orders opaque positions as the commit order they encode", () => {
    fc.assert(
      fc.property(fc.nat(2 ** 40), fc.nat(2 ** 40), (a, b) => positionReached(encode(a), encode(b)) === a >= b),
      { numRuns: 2000 }
    )
  })
})

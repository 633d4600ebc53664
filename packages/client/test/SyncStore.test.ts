import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Queue, Stream } from "effect"
import type { SyncCheckpoint } from "@cairn/domain/Sync"
import { SyncStore } from "@cairn/client/SyncStore"

const tempFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-client-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => join(dir, "local.sqlite")))

const checkpoint = (position: string, subject = "carol"): SyncCheckpoint => ({
  cursor: `cursor-${position}`,
  subject,
  database: "db-digest",
  catalogToken: "token",
  position
})

const task = (id: string, title: string) => ({ entity: "Task", id, record: { id, title } })

describe("SyncStore", () => {
  it.scoped("a snapshot arrives staged and replaces the records in one step; the file restores it", () =>
    Effect.gen(function* () {
      const file = yield* tempFile
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* SyncStore.open(file)
          assert.isTrue(Option.isNone(yield* store.state))
          yield* store.beginSnapshot("scope-a")
          yield* store.stagePage([task("t1", "One")], "next-1")
          // Staged pages are not records yet.
          assert.deepStrictEqual(yield* store.records("Task"), [])
          assert.deepStrictEqual(yield* store.staged, Option.some({ scopeKey: "scope-a", next: "next-1" }))
        })
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* SyncStore.open(file)
          // A snapshot interrupted by a restart continues from its continuation.
          assert.deepStrictEqual(yield* store.staged, Option.some({ scopeKey: "scope-a", next: "next-1" }))
          yield* store.commitSnapshot("scope-a", [task("t2", "Two")], checkpoint("c000002"))
          assert.deepStrictEqual((yield* store.records("Task")).map((r) => r.id), ["t1", "t2"])
          assert.isTrue(Option.isNone(yield* store.staged))
        })
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* SyncStore.open(file)
          const state = Option.getOrThrow(yield* store.state)
          assert.strictEqual(state.scopeKey, "scope-a")
          assert.deepStrictEqual(state.checkpoint, checkpoint("c000002"))
          assert.deepStrictEqual((yield* store.dump).get("Task/t2"), { id: "t2", title: "Two" })
          // A new snapshot replaces everything at once, including records it no longer holds.
          yield* store.beginSnapshot("scope-a")
          yield* store.commitSnapshot("scope-a", [task("t3", "Three")], checkpoint("c000009"))
          assert.deepStrictEqual((yield* store.records("Task")).map((r) => r.id), ["t3"])
        })
      )
    }))

  it.scoped("a batch and its checkpoint apply together or not at all", () =>
    Effect.gen(function* () {
      const store = yield* SyncStore.open(yield* tempFile)
      yield* store.beginSnapshot("s")
      yield* store.commitSnapshot("s", [task("t1", "One"), task("t2", "Two")], checkpoint("c000001"))
      yield* store.apply(
        [
          { _tag: "Upsert", ...task("t1", "One!") },
          { _tag: "Remove", entity: "Task", id: "t2" },
          { _tag: "Upsert", ...task("t3", "Three") }
        ],
        checkpoint("c000002")
      )
      assert.deepStrictEqual((yield* store.records("Task")).map((r) => [r.id, r.record["title"]]), [["t1", "One!"], ["t3", "Three"]])

      // A batch that fails part-way (a record that cannot be stored) leaves nothing behind.
      const broken = yield* Effect.exit(
        store.apply(
          [
            { _tag: "Remove", entity: "Task", id: "t1" },
            { _tag: "Upsert", entity: "Task", id: "t4", record: { id: "t4", size: 1n } as never }
          ],
          checkpoint("c000003")
        )
      )
      assert.isTrue(Exit.isFailure(broken))
      assert.deepStrictEqual((yield* store.records("Task")).map((r) => r.id), ["t1", "t3"])
      assert.strictEqual(Option.getOrThrow(yield* store.state).checkpoint.position, "c000002")

      yield* store.discard
      assert.isTrue(Option.isNone(yield* store.state))
      assert.strictEqual((yield* store.dump).size, 0)
    }))

  it.scopedLive("watch emits an entity's current records after each change touching it", () =>
    Effect.gen(function* () {
      const store = yield* SyncStore.open(yield* tempFile)
      yield* store.beginSnapshot("s")
      yield* store.commitSnapshot("s", [task("t1", "One"), { entity: "Label", id: "l1", record: { id: "l1", name: "x" } }], checkpoint("c000001"))
      const seen = yield* Queue.unbounded<ReadonlyArray<unknown>>()
      yield* store.watch("Task").pipe(
        Stream.runForEach((rows) => Queue.offer(seen, rows.map((r) => r.record["title"]))),
        Effect.forkScoped
      )
      assert.deepStrictEqual(yield* Queue.take(seen), ["One"])
      yield* store.apply([{ _tag: "Upsert", entity: "Label", id: "l1", record: { id: "l1", name: "y" } }], checkpoint("c000002"))
      // A change to labels alone does not re-run the task query.
      yield* Effect.sleep("100 millis")
      assert.strictEqual(yield* Queue.size(seen), 0)
      yield* store.apply([{ _tag: "Upsert", ...task("t1", "Uno") }], checkpoint("c000003"))
      assert.deepStrictEqual(yield* Queue.take(seen), ["Uno"])
      yield* store.apply([{ _tag: "Remove", entity: "Task", id: "t1" }], checkpoint("c000004"))
      assert.deepStrictEqual(yield* Queue.take(seen), [])
    }))
})

/**
 * `replaySync`'s direct path (no touched row is one the policy reads through): each touched
 * record is decided at the range's start and end, and a record whose own read fields kept
 * their values is decided once. These pin that the shortcut never carries a decision across
 * a change of a field the row scope (or the scope's `where`) reads.
 */
import { assert, describe, it } from "@effect/vitest"
import { defaultQueryLimits } from "@cairn/query/QueryLimits"
import { type SyncScope } from "@cairn/domain/Sync"
import type { RecordValue } from "@cairn/policy/Evaluate"
import { Effect } from "effect"
import { narrowingOf, replaySync, rootReads } from "../src/internal/replay.js"
import { resolveScope } from "../src/internal/scope.js"
import { tracker, viewOf, who } from "./support/tracker.js"

const AT = "2026-01-01T00:00:00.000Z"
const task = (projectId: string, title: string, status = "open"): RecordValue => ({ id: "t1", projectId, title, status, priority: 1, createdAt: AT, updatedAt: AT })
/** alice is a member of p1 only. */
const members: ReadonlyArray<RecordValue> = [{ id: "m1", projectId: "p1", subject: "alice", role: "viewer", createdAt: AT, updatedAt: AT }]
const peek = (entity: string, field: string, value: unknown) =>
  entity === "Member" && field === "projectId" ? members.filter((m) => m["projectId"] === value) : []

const decide = (scope: SyncScope, before: RecordValue | null, after: RecordValue | null) =>
  Effect.gen(function* () {
    const { catalog } = yield* tracker
    const resolved = yield* resolveScope(yield* viewOf(who("alice")), scope, defaultQueryLimits)
    const result = replaySync({
      catalog,
      scope: resolved,
      commits: [{ position: 2, changes: [{ entity: "Task", id: "t1", before, after }] }],
      maxDependents: 100,
      narrowing: narrowingOf(catalog, resolved),
      peek
    })
    assert.strictEqual(result?._tag, "Changes")
    return result?._tag === "Changes" ? result.changes.map((c) => `${c._tag}${c._tag === "Upsert" ? ` ${c.record["title"]}` : ""}`) : []
  })

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }
const openTasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["status"], value: "open" } }] }

describe("replay's direct path", () => {
  it.effect("a move out of or into the member's project is decided at both ends; an edit in place once", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* decide(tasks, task("p1", "a"), task("p2", "a")), ["Remove"])
      assert.deepStrictEqual(yield* decide(tasks, task("p2", "a"), task("p1", "a")), ["Upsert a"])
      assert.deepStrictEqual(yield* decide(tasks, task("p1", "a"), task("p1", "b")), ["Upsert b"])
      assert.deepStrictEqual(yield* decide(tasks, task("p2", "a"), task("p2", "b")), [])
      assert.deepStrictEqual(yield* decide(tasks, task("p1", "a"), task("p1", "a", "done")), ["Upsert a"])
    }))

  it.effect("a field only the scope's where reads counts as read", () =>
    Effect.gen(function* () {
      const { catalog } = yield* tracker
      const resolved = yield* resolveScope(yield* viewOf(who("alice")), openTasks, defaultQueryLimits)
      assert.sameMembers([...rootReads(catalog, resolved.entries[0]!)!], ["projectId", "status"])
      assert.deepStrictEqual(yield* decide(openTasks, task("p1", "a"), task("p1", "a", "done")), ["Remove"])
      assert.deepStrictEqual(yield* decide(openTasks, task("p1", "a", "done"), task("p1", "b")), ["Upsert b"])
    }))
})

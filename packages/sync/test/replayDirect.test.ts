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
import { narrowingOf, replayBySubject, replaySync, rootReads } from "../src/internal/replay.js"
import { resolveScope, subjectTemplate } from "../src/internal/scope.js"
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

describe("replay by subject", () => {
  /** alice in p1, bob in p2, carol in both; dave in none. */
  const memberships: ReadonlyArray<RecordValue> = [
    { id: "m1", projectId: "p1", subject: "alice", role: "viewer", createdAt: AT, updatedAt: AT },
    { id: "m2", projectId: "p2", subject: "bob", role: "owner", createdAt: AT, updatedAt: AT },
    { id: "m3", projectId: "p1", subject: "carol", role: "editor", createdAt: AT, updatedAt: AT },
    { id: "m4", projectId: "p2", subject: "carol", role: "viewer", createdAt: AT, updatedAt: AT }
  ]
  const everyRow = (entity: string, field: string, value: unknown) =>
    entity === "Member" && field === "projectId" ? memberships.filter((m) => m["projectId"] === value) : []
  const own = (subject: string) => (entity: string, field: string, value: unknown) => everyRow(entity, field, value).filter((m) => m["subject"] === subject)
  const withId = (record: RecordValue, id: string): RecordValue => ({ ...record, id })
  const commits = [
    { position: 2, changes: [{ entity: "Task", id: "t1", before: task("p1", "a"), after: task("p2", "a") }] },
    { position: 3, changes: [{ entity: "Task", id: "t2", before: withId(task("p2", "b"), "t2"), after: withId(task("p2", "b2"), "t2") }] },
    { position: 4, changes: [{ entity: "Task", id: "t3", before: null, after: withId(task("p1", "c"), "t3") }] }
  ]
  const listed = (result: { readonly _tag: string; readonly changes?: ReadonlyArray<{ readonly _tag: string; readonly id: string }> } | undefined) =>
    result?._tag === "Changes" ? result.changes!.map((c) => `${c._tag} ${c.id}`) : [result?._tag ?? "none"]

  it.effect("each subject of one template is sent what its own scope decides: members of different projects differently", () =>
    Effect.gen(function* () {
      const { catalog } = yield* tracker
      const scopeOf = (subject: string) => Effect.flatMap(viewOf(who(subject)), (view) => resolveScope(view, tasks, defaultQueryLimits))
      const template = subjectTemplate(yield* scopeOf("alice"), "alice")!
      // Every member of a project reads by one template.
      assert.strictEqual(subjectTemplate(yield* scopeOf("bob"), "bob")!.accessDigest, template.accessDigest)
      const bySubject = replayBySubject(catalog, template, commits, everyRow)!
      const expected: Record<string, ReadonlyArray<string>> = {
        alice: ["Remove t1", "Upsert t3"],
        bob: ["Upsert t1", "Upsert t2"],
        carol: ["Upsert t1", "Upsert t2", "Upsert t3"],
        dave: []
      }
      for (const subject of ["alice", "bob", "carol", "dave"]) {
        const scope = yield* scopeOf(subject)
        const alone = replaySync({ catalog, scope, commits, maxDependents: 100, narrowing: narrowingOf(catalog, scope), peek: own(subject) })
        assert.deepStrictEqual(listed(alone), expected[subject])
        assert.deepStrictEqual(bySubject(subject), alone)
      }
      // Subjects deciding alike share one answer (and its change objects).
      assert.strictEqual(bySubject("dave"), bySubject("erin"))
    }))

  it.effect("a range that touches a row the policy reads through (a membership) is left to each subject's own replay", () =>
    Effect.gen(function* () {
      const { catalog } = yield* tracker
      const template = subjectTemplate(yield* resolveScope(yield* viewOf(who("alice")), tasks, defaultQueryLimits), "alice")!
      const joined = { position: 5, changes: [{ entity: "Member", id: "m5", before: null, after: { id: "m5", projectId: "p2", subject: "alice", role: "viewer", createdAt: AT, updatedAt: AT } }] }
      assert.isUndefined(replayBySubject(catalog, template, [...commits, joined], everyRow))
    }))
})

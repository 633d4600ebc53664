import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { v7 as uuidv7 } from "uuid"
import { compile } from "@cairn/catalog/Catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog, OperationCatalogError } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { tracker } from "@cairn/tracker/tracker"
import { trackerHandlers } from "@cairn/tracker/handlers"

const catalog = Effect.orDie(compile(tracker))

const at = (iso: string) => TestClock.setTime(Date.parse(iso))

/**
 * The store over a temp dir. The test clock is set first: the idle sweeper runs on it,
 * so later moves of the clock stay small (hours, not decades).
 */
const store = Effect.gen(function* () {
  yield* at("2026-01-01T00:00:00.000Z")
  const dataDir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-tracker-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  return Databases.Default.pipe(
    Layer.provide(StoreConfig.layer({ dataDir })),
    Layer.provide(Archive.local),
    Layer.provide(OperationCatalog.layer(catalog, trackerHandlers)),
    // Tests only: these tests are about the handlers, not the policy that guards them.
    Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void }))
  )
})

const alice = new Principal({ subject: "alice", roles: [], claims: { email: "alice@example.com" }, scopes: [], databaseKey: DatabaseKey.make("org-1") })
const bob = new Principal({ subject: "bob", roles: [], claims: { email: "not an email" }, scopes: [], databaseKey: DatabaseKey.make("org-1") })

const call = (principal: Principal, owner: string, name: string, input: unknown, target?: string) =>
  Effect.flatMap(catalog, (c) =>
    Effect.scoped(
      Effect.flatMap(
        Effect.flatMap(Databases, (d) => d.activate(principal.databaseKey)),
        (database) =>
          mutate({
            view: View.full(c),
            principal,
            database,
            request: {
              operation: operationRef(owner, name),
              input,
              invocationId: InvocationId.make(uuidv7()),
              ...(target !== undefined ? { target: { kind: "entity" as const, entity: owner, id: target } } : {})
            }
          })
      )
    )
  )

const idOf = (receipt: Receipt) => (receipt.output as { readonly id: string }).id

const rejection = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.flip(effect), (e) => [e._tag, e.message] as const)

const rowsOf = (table: string, where = "1 = 1", params: ReadonlyArray<unknown> = []) =>
  Effect.scoped(
    Effect.flatMap(Databases, (d) =>
      Effect.flatMap(d.activate(DatabaseKey.make("org-1")), (db) => Effect.orDie(db.reader.unsafe<Record<string, unknown>>(`SELECT * FROM "${table}" WHERE ${where}`, params)))
    )
  )

describe("tracker handlers", () => {
  it.effect("cover every operation of the catalog exactly once", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const ops = yield* OperationCatalog.make(c, trackerHandlers)
      for (const op of c.operations) assert.isFunction(ops.handler(op))
      const { ["Task.reopen"]: _, ...missing } = trackerHandlers
      const error = yield* Effect.flip(OperationCatalog.make(c, { ...missing, "Task.delete": trackerHandlers["Task.complete"]! }))
      assert.instanceOf(error, OperationCatalogError)
      assert.deepStrictEqual([error.missing, error.extra], [["Task.reopen"], ["Task.delete"]])
      assert.include(error.message, `operation "Task.reopen" has no handler`)
    }))

  it.scoped("Project.create makes the caller its owner; Project.archive refuses an archived project", () =>
    Effect.gen(function* () {
      const layer = yield* store
      yield* Effect.gen(function* () {
        yield* at("2026-01-02T03:04:05.000Z")
        const project = idOf(yield* call(alice, "Project", "create", { name: "Apollo", description: "Moon" }))
        assert.deepStrictEqual(yield* rowsOf("Project"), [
          { id: project, name: "Apollo", description: "Moon", archived: 0, createdAt: "2026-01-02T03:04:05.000Z", updatedAt: "2026-01-02T03:04:05.000Z" }
        ])
        const members = yield* rowsOf("Member")
        assert.strictEqual(members.length, 1)
        assert.deepInclude(members[0], { projectId: project, subject: "alice", role: "owner", email: "alice@example.com" })
        // An email claim that is not an address is left out rather than stored.
        const other = idOf(yield* call(bob, "Project", "create", { name: "Gemini" }))
        assert.deepInclude((yield* rowsOf("Member", "projectId = ?", [other]))[0], { subject: "bob", email: null })

        yield* at("2026-01-02T04:00:00.000Z")
        yield* call(alice, "Project", "archive", {}, project)
        assert.deepInclude((yield* rowsOf("Project", "id = ?", [project]))[0], { archived: 1, updatedAt: "2026-01-02T04:00:00.000Z", createdAt: "2026-01-02T03:04:05.000Z" })
        assert.deepStrictEqual(yield* rejection(call(alice, "Project", "archive", {}, project)), ["OperationRejected", "This project is already archived."])
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("Member.add refuses an existing member; a missing project is inaccessible", () =>
    Effect.gen(function* () {
      const layer = yield* store
      yield* Effect.gen(function* () {
        const project = idOf(yield* call(alice, "Project", "create", { name: "Apollo" }))
        const input = { projectId: project, subject: "carol", role: "editor", email: "carol@example.com" }
        const member = idOf(yield* call(alice, "Member", "add", input))
        assert.deepInclude((yield* rowsOf("Member", "id = ?", [member]))[0], { subject: "carol", role: "editor", projectId: project })
        assert.deepStrictEqual(yield* rejection(call(alice, "Member", "add", { ...input, role: "viewer" })), [
          "OperationRejected",
          "This user is already a member of the project."
        ])
        assert.deepStrictEqual(yield* rejection(call(alice, "Member", "add", { ...input, subject: "alice" })), [
          "OperationRejected",
          "This user is already a member of the project."
        ])
        const [tag] = yield* rejection(call(alice, "Member", "add", { ...input, projectId: uuidv7() }))
        assert.strictEqual(tag, "Inaccessible")
        assert.strictEqual((yield* rowsOf("Member")).length, 2)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("Task.create opens a task; an archived project refuses it, a missing one is inaccessible", () =>
    Effect.gen(function* () {
      const layer = yield* store
      yield* Effect.gen(function* () {
        yield* at("2026-01-01T10:00:00.000Z")
        const project = idOf(yield* call(alice, "Project", "create", { name: "Apollo" }))
        const task = idOf(yield* call(alice, "Task", "create", { projectId: project, title: "Launch", priority: 1, dueDate: "2026-01-31" }))
        assert.deepStrictEqual(yield* rowsOf("Task"), [
          {
            id: task,
            projectId: project,
            title: "Launch",
            status: "open",
            assigneeId: null,
            priority: 1,
            dueDate: "2026-01-31",
            createdAt: "2026-01-01T10:00:00.000Z",
            updatedAt: "2026-01-01T10:00:00.000Z"
          }
        ])
        const [tag, message] = yield* rejection(call(alice, "Task", "create", { projectId: uuidv7(), title: "Nowhere" }))
        assert.strictEqual(tag, "Inaccessible")
        assert.notInclude(message, "exist")
        yield* call(alice, "Project", "archive", {}, project)
        assert.deepStrictEqual(yield* rejection(call(alice, "Task", "create", { projectId: project, title: "Late" })), [
          "OperationRejected",
          "This project is archived and accepts no new tasks."
        ])
        assert.strictEqual((yield* rowsOf("Task")).length, 1)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("Task.complete and Task.reopen refuse a task already in that state; rename and assign update it", () =>
    Effect.gen(function* () {
      const layer = yield* store
      yield* Effect.gen(function* () {
        const project = idOf(yield* call(alice, "Project", "create", { name: "Apollo" }))
        const task = idOf(yield* call(alice, "Task", "create", { projectId: project, title: "Launch" }))
        const status = Effect.map(rowsOf("Task", "id = ?", [task]), (rows) => rows[0]!["status"])
        assert.deepStrictEqual(yield* rejection(call(alice, "Task", "reopen", {}, task)), ["OperationRejected", "This task is already open."])
        yield* at("2026-01-01T01:00:00.000Z")
        yield* call(alice, "Task", "complete", {}, task)
        assert.strictEqual(yield* status, "done")
        assert.deepStrictEqual(yield* rejection(call(alice, "Task", "complete", {}, task)), ["OperationRejected", "This task is already done."])
        yield* call(alice, "Task", "reopen", {}, task)
        assert.strictEqual(yield* status, "open")
        yield* at("2026-01-01T02:00:00.000Z")
        yield* call(alice, "Task", "rename", { title: "Launch v2" }, task)
        yield* call(alice, "Task", "assign", { assigneeId: "bob" }, task)
        assert.deepInclude((yield* rowsOf("Task", "id = ?", [task]))[0], { title: "Launch v2", assigneeId: "bob", updatedAt: "2026-01-01T02:00:00.000Z" })
        const [tag] = yield* rejection(call(alice, "Task", "complete", {}, uuidv7()))
        assert.strictEqual(tag, "Inaccessible")
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("Comment.add records the caller as author; only the author may edit", () =>
    Effect.gen(function* () {
      const layer = yield* store
      yield* Effect.gen(function* () {
        const project = idOf(yield* call(alice, "Project", "create", { name: "Apollo" }))
        const task = idOf(yield* call(alice, "Task", "create", { projectId: project, title: "Launch" }))
        const comment = idOf(yield* call(bob, "Comment", "add", { taskId: task, body: "Looks good" }))
        assert.deepInclude((yield* rowsOf("Comment", "id = ?", [comment]))[0], { taskId: task, body: "Looks good", authorId: "bob" })
        assert.deepStrictEqual(yield* rejection(call(alice, "Comment", "edit", { body: "Hijacked" }, comment)), [
          "OperationRejected",
          "Only the author of a comment can edit it."
        ])
        yield* call(bob, "Comment", "edit", { body: "Looks great" }, comment)
        assert.strictEqual((yield* rowsOf("Comment", "id = ?", [comment]))[0]!["body"], "Looks great")
        const [tag] = yield* rejection(call(bob, "Comment", "add", { taskId: uuidv7(), body: "Lost" }))
        assert.strictEqual(tag, "Inaccessible")
        assert.strictEqual((yield* rowsOf("Comment")).length, 1)
      }).pipe(Effect.provide(layer))
    }))
})

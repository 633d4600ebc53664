import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { RowScope } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { describe as describeCatalog, DescribeLimits } from "@cairn/catalog/Describe"
import { View } from "@cairn/catalog/View"
import type { DescribeRequest } from "@cairn/domain/Describe"
import { synthetic } from "@cairn/testkit/fixture/synthetic"
import { tracker } from "@cairn/testkit/fixture/tracker"

const Keys = Layer.merge(Sealer.layer(Redacted.make("test-secret")), DescribeLimits.layer())
const run = (view: View, request: DescribeRequest) => describeCatalog(view, request)
const trackerView = Effect.map(compile(tracker), View.full)

describe("describe", () => {
  it.effect("browse lists cards of the requested kinds with the catalog token", () =>
    Effect.gen(function* () {
      const view = yield* trackerView
      const result = yield* run(view, { browse: { kinds: ["entity"] } })
      expect(result.catalogToken).toBe(view.token)
      expect(result.cards.map((c) => c.ref)).toEqual(
        ["Comment", "Label", "Member", "Project", "Task"].map((name) => ({ kind: "entity", name }))
      )
      expect(result.cursor).toBeUndefined()
      const task = result.cards.find((c) => c.ref.kind === "entity" && c.ref.name === "Task")!
      expect(task.fields).toContain("status")
      expect(task.summary).toBe("A unit of work in a project, open or done.")
      const ops = yield* run(view, { browse: { kinds: ["operation", "trait"] } })
      expect(ops.cards).toHaveLength(12)
      expect(ops.cards.filter((c) => c.ref.kind === "trait")).toHaveLength(2)
      expect(ops.cards.find((c) => c.ref.kind === "operation" && c.ref.name === "complete")!.targeted).toBe(true)
    }).pipe(Effect.provide(Keys)))

  it.effect("search ranks name matches before description matches", () =>
    Effect.gen(function* () {
      const view = yield* trackerView
      const result = yield* run(view, { search: "complete task" })
      expect(result.cards[0]!.ref).toEqual({ kind: "operation", owner: { kind: "entity", name: "Task" }, name: "complete" })
      const comment = yield* run(view, { search: "Comment" })
      expect(comment.cards[0]!.ref).toEqual({ kind: "entity", name: "Comment" })
      const none = yield* run(view, { search: "zebra" })
      expect(none.cards).toEqual([])
      const described = yield* run(view, { search: "archived" })
      expect(described.cards.map((c) => c.ref)).toContainEqual({ kind: "operation", owner: { kind: "entity", name: "Project" }, name: "archive" })
    }).pipe(Effect.provide(Keys)))

  it.effect("inspect returns field, relationship, operator, input and output schemas", () =>
    Effect.gen(function* () {
      const view = yield* trackerView
      const result = yield* run(view, {
        inspect: [
          { kind: "entity", name: "Task" },
          { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "create" },
          { kind: "trait", name: "Timestamped" }
        ]
      })
      const [task, create, trait] = result.definitions as any
      expect(task.fields.status).toMatchObject({ schema: { enum: ["open", "done"] }, nullable: false, operators: ["eq", "ne", "in", "notIn"] })
      expect(task.fields.title.operators).toContain("startsWith")
      expect(task.fields.dueDate.operators).toContain("isNull")
      expect(task.relationships.project).toEqual({ target: { kind: "entity", name: "Project" }, via: "projectId", cardinality: "one" })
      expect(task.operations.map((o: any) => o.name)).toEqual(["assign", "complete", "create", "rename", "reopen"])
      expect(task.fields.createdAt.trait).toBe("Timestamped")
      expect(create.targeted).toBe(false)
      expect(create.input.required).toEqual(["projectId", "title"])
      expect(create.output.properties.id.type).toBe("string")
      expect(Object.keys(trait.fields)).toEqual(["createdAt", "updatedAt"])
      expect(result.cards).toHaveLength(3)
    }).pipe(Effect.provide(Keys)))

  it.effect("an unknown reference fails inaccessible, as a hidden one does", () =>
    Effect.gen(function* () {
      const view = yield* trackerView
      const error = yield* Effect.flip(run(view, { inspect: [{ kind: "operation", owner: { kind: "entity", name: "Task" }, name: "delete" }] }))
      expect(error._tag).toBe("Inaccessible")
      expect(error.code).toBe("inaccessible")
      expect(error.message).toBe(`No operation named "Task.delete" is available to you. Browse or search with describe to find exact references.`)
    }).pipe(Effect.provide(Keys)))

  it.effect("requires exactly one of browse, search or inspect", () =>
    Effect.gen(function* () {
      const view = yield* trackerView
      const none = yield* Effect.flip(run(view, {}))
      expect(none._tag).toBe("InvalidQuery")
      expect(none.message).toContain("has none")
      const two = yield* Effect.flip(run(view, { browse: { kinds: ["entity"] }, search: "task" }))
      expect(two.message).toContain("has browse and search")
    }).pipe(Effect.provide(Keys)))

  it.effect("a hidden definition is indistinguishable from a missing one", () =>
    Effect.gen(function* () {
      const catalog = yield* compile(tracker)
      const narrow = new View(catalog, {
        entity: (e) => e !== "Member",
        field: (e, f) => !(e === "Task" && f === "assigneeId"),
        operation: (_o, n) => n !== "assign",
        rowScope: () => RowScope.all
      })
      const hidden = yield* Effect.flip(run(narrow, { inspect: [{ kind: "entity", name: "Member" }] }))
      const missing = yield* Effect.flip(run(narrow, { inspect: [{ kind: "entity", name: "Membr" }] }))
      expect(hidden.message.replace("Member", "X")).toBe(missing.message.replace("Membr", "X"))
      const entities = yield* run(narrow, { browse: { kinds: ["entity", "operation"] } })
      expect(entities.cards.some((c) => JSON.stringify(c).includes("Member"))).toBe(false)
      const task = (yield* run(narrow, { inspect: [{ kind: "entity", name: "Task" }] })).definitions![0] as any
      expect(Object.keys(task.fields)).not.toContain("assigneeId")
      expect(task.operations.map((o: any) => o.name)).not.toContain("assign")
      expect((yield* run(narrow, { search: "assign" })).cards.every((c) => c.ref.name !== "assign")).toBe(true)
    }).pipe(Effect.provide(Keys)))
})

describe("describe paging", () => {
  it.effect("pages a 500-entity catalog with no duplicate and no gap", () =>
    Effect.gen(function* () {
      const view = View.full(yield* compile(synthetic(500)))
      const seen: Array<string> = []
      let after: string | undefined
      let pages = 0
      do {
        const page = yield* run(view, { browse: { kinds: ["entity"] }, page: { limit: 40, ...(after ? { after } : {}) } })
        seen.push(...page.cards.map((c) => c.ref.name))
        after = page.cursor
        pages++
      } while (after)
      expect(pages).toBe(13)
      expect(seen).toHaveLength(500)
      expect(new Set(seen).size).toBe(500)
      expect(seen).toEqual([...seen].sort())
      const first = yield* run(view, { browse: { kinds: ["operation"] } })
      expect(first.cards).toHaveLength(25)
      expect(first.cursor).toBeDefined()
    }).pipe(Effect.provide(Keys)))

  it.effect("page.limit and inspect have a maximum (the discovery limit), configurable; over it is query_budget_exceeded", () =>
    Effect.gen(function* () {
      const view = View.full(yield* compile(synthetic(50)))
      const error = yield* Effect.flip(run(view, { browse: { kinds: ["entity"] }, page: { limit: 101 } }))
      // A well-formed request over a limit: the budget code, as a query's page.first over its maximum.
      expect(error._tag).toBe("QueryBudgetExceeded")
      expect(error.message).toBe("page.limit may be at most 100; ask for 100 or fewer and continue with page.after.")
      const inspect = yield* Effect.flip(
        run(view, { inspect: Array.from({ length: 101 }, (_, i) => ({ kind: "entity" as const, name: `E${i}` })) })
      )
      expect(inspect._tag).toBe("QueryBudgetExceeded")
      const small = yield* run(view, { browse: { kinds: ["entity"] }, page: { limit: 5 } }).pipe(
        Effect.provideService(DescribeLimits, { defaultLimit: 2, maxLimit: 5 })
      )
      expect(small.cards).toHaveLength(5)
      const tooBig = yield* Effect.flip(
        run(view, { browse: { kinds: ["entity"] }, page: { limit: 6 } }).pipe(Effect.provideService(DescribeLimits, { defaultLimit: 2, maxLimit: 5 }))
      )
      expect(tooBig._tag).toBe("QueryBudgetExceeded")
    }).pipe(Effect.provide(Keys)))

  it.effect("a cursor from another query, another catalog, or tampered, fails invalid_query", () =>
    Effect.gen(function* () {
      const view = View.full(yield* compile(synthetic(60)))
      const other = View.full(yield* compile(synthetic(61)))
      const page = yield* run(view, { browse: { kinds: ["entity"] } })
      const cursor = page.cursor!
      const otherQuery = yield* Effect.flip(run(view, { search: "synthetic", page: { after: cursor } }))
      expect(otherQuery.message).toContain("different describe request")
      const otherCatalog = yield* Effect.flip(run(other, { browse: { kinds: ["entity"] }, page: { after: cursor } }))
      expect(otherCatalog.message).toContain("earlier version of the catalog")
      const flipped = cursor.slice(0, 10) + (cursor[10] === "A" ? "B" : "A") + cursor.slice(11)
      const tampered = yield* Effect.flip(run(view, { browse: { kinds: ["entity"] }, page: { after: flipped } }))
      expect(tampered.message).toContain("not a cursor this service issued")
      const foreignKey = yield* Effect.flip(
        run(view, { browse: { kinds: ["entity"] }, page: { after: cursor } }).pipe(Effect.provide(Sealer.layer(Redacted.make("other"))))
      )
      expect(foreignKey._tag).toBe("InvalidQuery")
      const next = yield* run(view, { browse: { kinds: ["entity"] }, page: { after: cursor } })
      expect(next.cards[0]!.ref.name).toBe("Thing0025")
    }).pipe(Effect.provide(Keys)))
})

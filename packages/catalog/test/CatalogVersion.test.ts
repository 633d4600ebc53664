// The catalog token as a version per definition: a request is admitted when every definition it
// touches is in the token at its current version. Additive changes keep old tokens; a migration
// covering an entity, or a change to what an operation's callers rely on, does not.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import { View } from "@cairn/catalog/View"

const Project = Entity.make("Project", { description: "A project.", fields: { name: Schema.String } })
const fields = { title: Schema.String, projectId: Schema.String }
const task = (extra: Schema.Struct.Fields = {}) =>
  Entity.make("Task", { description: "A task.", fields: { ...fields, ...extra }, relationships: { project: Entity.belongsTo("Project", "projectId") } })
const create = (input: Schema.Struct.Fields) =>
  Operation.make({ owner: "Task", name: "create", description: "Create.", targeted: false, input: Schema.Struct(input) as unknown as Schema.Schema.AnyNoContext, output: Schema.Struct({ id: Schema.String }) })

const root = (options: { readonly task?: Entity.Entity<string, any>; readonly input?: Schema.Struct.Fields; readonly migrations?: ReadonlyArray<Migration.Migration>; readonly extra?: ReadonlyArray<Entity.Entity<string, any>> } = {}) =>
  RootSchema.make("tracker", {
    entities: [Project, options.task ?? task(), ...(options.extra ?? [])],
    operations: [create(options.input ?? { title: Schema.String })],
    migrations: options.migrations ?? []
  })

const tokenOf = (r: RootSchema.RootSchema) => Effect.map(compile(r), (c) => View.full(c).token)
const viewOf = (r: RootSchema.RootSchema) => Effect.map(compile(r), View.full)
const touchesTask = [CatalogVersion.entity("Task")]
const touchesProject = [CatalogVersion.entity("Project")]
const touchesCreate = [CatalogVersion.operation("Task", "create"), CatalogVersion.entity("Task")]

describe("catalog versions", () => {
  it.effect("additive changes keep old tokens for every definition", () =>
    Effect.gen(function* () {
      const old = yield* tokenOf(root())
      expect(old).toMatch(/^v2\.[\w-]+$/)
      const next = yield* viewOf(
        root({
          task: task({ notes: Schema.optional(Schema.String) }),
          input: { title: Schema.String, notes: Schema.optional(Schema.String) },
          extra: [Entity.make("Label", { description: "A label.", fields: { name: Schema.String } })]
        })
      )
      // Nothing an old client relies on changed: even the token stays the same.
      expect(next.token).toBe(old)
      for (const touched of [touchesTask, touchesProject, touchesCreate]) expect(next.admits(old, touched)).toBe(true)
    }))

  it.effect("a migration covering an entity refuses old tokens on it only", () =>
    Effect.gen(function* () {
      const old = yield* tokenOf(root())
      const next = yield* viewOf(root({ migrations: [Migration.make({ name: "m", description: "Task changed.", covers: ["Task.title"] })] }))
      expect(next.admits(old, touchesTask)).toBe(false)
      expect(next.admits(old, touchesCreate)).toBe(false)
      expect(next.admits(old, touchesProject)).toBe(true)
      expect(next.admits(next.token, touchesTask)).toBe(true)
    }))

  it.effect("an operation's version follows what callers rely on: required inputs and output", () =>
    Effect.gen(function* () {
      const old = yield* tokenOf(root())
      const required = yield* viewOf(root({ input: { title: Schema.String, due: Schema.String } }))
      expect(required.admits(old, [CatalogVersion.operation("Task", "create")])).toBe(false)
      expect(required.admits(old, touchesTask)).toBe(true)
    }))

  it.effect("a query touches its source and every entity its relationship paths pass through", () =>
    Effect.gen(function* () {
      const catalog = yield* compile(root())
      const touched = CatalogVersion.touchedByQuery(catalog, {
        from: { name: "Task" },
        select: { title: { path: ["title"] } },
        where: { op: "eq", path: ["project", "name"], value: "x" }
      } as any)
      expect(touched).toEqual([CatalogVersion.entity("Task"), CatalogVersion.entity("Project")])
      expect(CatalogVersion.touchedByQuery(catalog, { from: { name: "Task" }, select: { title: { path: ["title"] } } } as any)).toEqual([CatalogVersion.entity("Task")])
    }))

  it.effect("tokens of another root schema, malformed tokens and the pre-version whole-catalog token", () =>
    Effect.gen(function* () {
      const view = yield* viewOf(root())
      const other = yield* tokenOf(RootSchema.make("other", { entities: [Project, task()], operations: [create({ title: Schema.String })] }))
      expect(view.admits(other, touchesProject)).toBe(false)
      for (const bad of ["stale", "v2.", "v2.!!", view.token.slice(0, -2)]) expect(view.admits(bad, touchesProject), bad).toBe(false)
      expect(view.admits(view.catalog.token, touchesCreate)).toBe(true)
    }))
})

import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema, Trait } from "@cairn/catalog"
import { Catalog, compile } from "@cairn/catalog/Catalog"
import { CatalogError } from "@cairn/catalog/CatalogError"
import { synthetic } from "@cairn/testkit/fixture/synthetic"
import { tracker } from "@cairn/testkit/fixture/tracker"

const problemsOf = (root: RootSchema.RootSchema) =>
  compile(root).pipe(
    Effect.flip,
    Effect.map((e: CatalogError) => e.problems)
  )

const Named = Trait.make("Named", { description: "Has a name.", fields: { name: Schema.String } })
const Base = Entity.make("Base", { description: "A base record.", traits: [Named], fields: { name: Schema.String } })

describe("Catalog.compile", () => {
  it.effect("compiles the tracker with stored representations derived from schemas", () =>
    Effect.gen(function* () {
      const catalog = yield* compile(tracker)
      expect(catalog.name).toBe("tracker")
      expect(catalog.entities.map((e) => e.name)).toEqual(["Comment", "Label", "Member", "Project", "Task"])
      const task = catalog.entity("Task")!
      expect(task.field("status")).toMatchObject({ column: "text", nullable: false, literals: ["open", "done"] })
      expect(task.field("priority")).toMatchObject({ column: "integer", nullable: true })
      expect(catalog.entity("Project")!.field("archived")).toMatchObject({ column: "boolean" })
      expect(task.relationship("project")).toEqual({ name: "project", target: "Project", via: "projectId" })
      expect(task.field("projectId")!.indexed).toBe(true)
      expect(catalog.operation("Task", "complete")).toMatchObject({ targeted: true })
      expect(catalog.operation("Project", "create")).toMatchObject({ targeted: false })
      expect(catalog.operations).toHaveLength(10)
      expect(catalog.trait("Timestamped")!.entities).toEqual(["Comment", "Label", "Member", "Project", "Task"])
      expect(catalog.trait("Authored")!.entities).toEqual(["Comment"])
    }))

  it.effect("reports duplicate names", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(
        RootSchema.make("app", {
          traits: [Named, Named],
          entities: [Base, Base],
          operations: [
            Operation.make({ owner: Base, name: "make", description: "x", targeted: false, input: Schema.Struct({}), output: Schema.Struct({}) }),
            Operation.make({ owner: Base, name: "make", description: "x", targeted: false, input: Schema.Struct({}), output: Schema.Struct({}) })
          ]
        })
      )
      expect(problems).toContain(`trait "Named": duplicate name`)
      expect(problems).toContain(`entity "Base": duplicate name`)
      expect(problems).toContain(`operation "Base.make": duplicate name`)
    }))

  it.effect("reports a relationship to an unknown entity and through an unknown field", () =>
    Effect.gen(function* () {
      const Child = Entity.make("Child", {
        description: "A child.",
        fields: { parentId: Schema.String },
        relationships: { parent: Entity.belongsTo("Parent", "parentId"), other: Entity.belongsTo("Child", "missingId") }
      })
      const problems = yield* problemsOf(RootSchema.make("app", { entities: [Child] }))
      expect(problems).toContain(`entity "Child": relationship "parent" targets unknown entity "Parent"`)
      expect(problems).toContain(`entity "Child": relationship "other" goes through unknown field "missingId"`)
    }))

  it.effect("reports a migration's conversion of a field it does not cover, and malformed discards", () =>
    Effect.gen(function* () {
      const Book = Entity.make("Book", { description: "A book.", fields: { isbn: Schema.optional(Schema.Number) } })
      const migration = Migration.make({
        name: "isbn",
        description: "ISBNs are numbers.",
        covers: ["Book.title"],
        convert: { "Book.isbn": (v) => Number(v), Book: (v) => v },
        discards: ["Book.isbn.x"]
      })
      expect(yield* problemsOf(RootSchema.make("app", { entities: [Book], migrations: [migration] }))).toEqual([
        `migration "isbn": discards "Book.isbn.x", which is neither Entity nor Entity.field`,
        `migration "isbn": converts "Book.isbn" but does not cover it; add it to covers`,
        `migration "isbn": converts "Book", which is not Entity.field`
      ])
    }))

  it.effect("reports an index over an unknown field", () =>
    Effect.gen(function* () {
      const E = Entity.make("E", { description: "e", fields: { a: Schema.String }, indexes: [["a", "b"]] })
      expect(yield* problemsOf(RootSchema.make("app", { entities: [E] }))).toEqual([`entity "E": index over unknown field "b"`])
    }))

  it.effect("reports a trait an entity does not satisfy, missing or mistyped", () =>
    Effect.gen(function* () {
      const Missing = Entity.make("Missing", { description: "m", traits: [Named], fields: { title: Schema.String } })
      const Mistyped = Entity.make("Mistyped", { description: "m", traits: [Named], fields: { name: Schema.Number } })
      const Nullable = Entity.make("Nullable", { description: "m", traits: [Named], fields: { name: Schema.optional(Schema.String) } })
      const problems = yield* problemsOf(RootSchema.make("app", { traits: [Named], entities: [Missing, Mistyped, Nullable] }))
      expect(problems).toEqual([
        `entity "Missing": does not satisfy trait "Named": missing field "name"`,
        `entity "Mistyped": does not satisfy trait "Named": field "name" is stored as real, the trait requires text`,
        `entity "Nullable": does not satisfy trait "Named": field "name" is stored as text (nullable), the trait requires text`
      ])
    }))

  it.effect("a trait must be part of the root schema", () =>
    Effect.gen(function* () {
      expect(yield* problemsOf(RootSchema.make("app", { entities: [Base] }))).toEqual([
        `entity "Base": declares trait "Named", which is not in the root schema`
      ])
    }))

  it.effect("reports an operation owned by an unknown entity", () =>
    Effect.gen(function* () {
      const op = Operation.make({ owner: "Ghost", name: "haunt", description: "Boo.", targeted: true, input: Schema.Struct({}), output: Schema.Struct({}) })
      expect(yield* problemsOf(RootSchema.make("app", { traits: [Named], entities: [Base], operations: [op] }))).toEqual([
        `operation "Ghost.haunt": owner entity "Ghost" is not defined`
      ])
    }))

  it.effect("reports invalid identifiers and reserved or unstorable fields", () =>
    Effect.gen(function* () {
      const bad = Entity.make("bad name", { description: "b", fields: { "Weird-Field": Schema.String, id: Schema.String } })
      const nested = Entity.make("Nested", { description: "n", fields: { inner: Schema.Struct({ a: Schema.String }) } })
      const op = Operation.make({ owner: nested, name: "Do It", description: "d", targeted: false, input: Schema.String, output: Schema.Struct({}) })
      const problems = yield* problemsOf(RootSchema.make("Bad Root", { entities: [bad, nested], operations: [op] }))
      expect(problems).toEqual(
        expect.arrayContaining([
          `root schema "Bad Root": invalid name (lower case letters, digits, - or _)`,
          `entity "bad name": invalid name (PascalCase identifier)`,
          `entity "bad name": field "Weird-Field" has an invalid name (camelCase identifier)`,
          `entity "bad name": "id" is reserved for the server-generated record id`,
          `entity "Nested": field "inner": its schema must encode to a string, number, boolean or a union of same-typed literals (optionally nullable)`,
          `operation "Nested.Do It": invalid name (camelCase identifier)`,
          `operation "Nested.Do It": input schema must be an object (Schema.Struct)`
        ])
      )
      expect(problems).toHaveLength(7)
    }))
})

describe("catalog token", () => {
  it.effect("is stable across compilations (and so across restarts)", () =>
    Effect.gen(function* () {
      const a = yield* compile(tracker)
      const b = yield* compile(tracker)
      expect(a.token).toBe(b.token)
      expect(a.token).toMatch(/^[A-Za-z0-9_-]{24}$/)
      expect(a).not.toBe(b)
    }))

  it.effect("changes with any definition change", () =>
    Effect.gen(function* () {
      const make = (description: string, extra: boolean, targeted: boolean) => {
        const E = Entity.make("E", {
          description,
          fields: extra ? { a: Schema.String, b: Schema.optional(Schema.Number) } : { a: Schema.String }
        })
        const op = Operation.make({ owner: E, name: "go", description: "Go.", targeted, input: Schema.Struct({}), output: Schema.Struct({}) })
        return RootSchema.make("app", { entities: [E], operations: [op] })
      }
      const tokens = new Set<string>()
      for (const root of [make("one", false, false), make("two", false, false), make("one", true, false), make("one", false, true)]) {
        tokens.add((yield* compile(root)).token)
      }
      expect(tokens.size).toBe(4)
    }))

  it.effect("covers the policy digest, so a policy change changes the token", () =>
    Effect.gen(function* () {
      const catalog = yield* compile(tracker)
      const withPolicy = catalog.withPolicyDigest("policy-v1")
      expect(withPolicy.token).not.toBe(catalog.token)
      expect(withPolicy.withPolicyDigest("policy-v2").token).not.toBe(withPolicy.token)
      expect(withPolicy.fingerprint).toBe(catalog.fingerprint)
      expect(withPolicy).toBeInstanceOf(Catalog)
    }))
})

describe("synthetic catalog", () => {
  it.effect("500 entities compile", () =>
    Effect.gen(function* () {
      const catalog = yield* compile(synthetic(500))
      expect(catalog.entities).toHaveLength(500)
      expect(catalog.operations).toHaveLength(1000)
      expect(catalog.entity("Thing0499")!.relationship("parent")!.target).toBe("Thing0498")
    }))
})

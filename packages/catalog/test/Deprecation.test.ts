// Deprecations between the stages of an expand/contract change: shown by describe on cards and
// definitions (with a replacement only when the caller can see it), and checked at compile so a
// replacement always names a real definition.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Entity, Operation, RootSchema, RowScope } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { describe as describeCatalog, DescribeLimits } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"

const Keys = Layer.merge(Sealer.layer(Redacted.make("test-secret")), DescribeLimits.layer())

const Note = Entity.make("Note", {
  description: "A note.",
  fields: { text: Schema.String, body: Schema.optional(Schema.String) },
  deprecatedFields: { text: { reason: "Renamed to body.", replacement: "body" } }
})
const Memo = Entity.make("Memo", { description: "The old note.", fields: { text: Schema.String }, deprecated: { reason: "Use Note.", replacement: "Note" } })
const write = Operation.make({ owner: Note, name: "write", description: "Write a note.", targeted: false, input: Schema.Struct({}), output: Schema.Struct({}) })
const jot = Operation.make({
  owner: Note, name: "jot", description: "Write a note (old name).", targeted: false, input: Schema.Struct({}), output: Schema.Struct({}),
  deprecated: { reason: "Renamed.", replacement: "Note.write" }
})
const root = RootSchema.make("notes", { entities: [Note, Memo], operations: [write, jot] })

describe("deprecations", () => {
  it.effect("describe marks deprecated entities, fields and operations with their replacement", () =>
    Effect.gen(function* () {
      const view = View.full(yield* compile(root))
      const cards = (yield* describeCatalog(view, { browse: { kinds: ["entity", "operation"] } })).cards
      expect(cards.find((c) => c.ref.kind === "entity" && c.ref.name === "Memo")!.deprecated).toEqual({ reason: "Use Note.", replacement: "Note" })
      expect(cards.find((c) => c.ref.kind === "entity" && c.ref.name === "Note")!.deprecated).toBeUndefined()
      expect(cards.find((c) => c.ref.kind === "operation" && c.ref.name === "jot")!.deprecated).toEqual({ reason: "Renamed.", replacement: "Note.write" })
      const inspected = yield* describeCatalog(view, { inspect: [{ kind: "entity", name: "Note" }] })
      const note = inspected.definitions![0] as { fields: Record<string, { deprecated?: unknown }> }
      expect(note.fields["text"]!.deprecated).toEqual({ reason: "Renamed to body.", replacement: "body" })
      expect(note.fields["body"]!.deprecated).toBeUndefined()

      // A caller who cannot see the replacement is not told its name.
      const narrow = new View(view.catalog, { entity: (e) => e === "Memo", field: () => true, operation: () => true, rowScope: () => RowScope.all })
      const memo = (yield* describeCatalog(narrow, { browse: { kinds: ["entity"] } })).cards[0]!
      expect(memo.deprecated).toEqual({ reason: "Use Note." })
    }).pipe(Effect.provide(Keys)))

  it.effect("a replacement must name a real definition", () =>
    Effect.gen(function* () {
      const broken = RootSchema.make("notes", {
        entities: [
          Entity.make("Note", { description: "A note.", fields: { text: Schema.String }, deprecatedFields: { text: { reason: "x", replacement: "body" }, gone: { reason: "y" } } }),
          Entity.make("Memo", { description: "Old.", fields: { text: Schema.String }, deprecated: { reason: "z", replacement: "Nope" } })
        ],
        operations: [Operation.make({ owner: "Note", name: "jot", description: "Jot.", targeted: false, input: Schema.Struct({}), output: Schema.Struct({}), deprecated: { reason: "r", replacement: "Note.write" } })]
      })
      const error = yield* Effect.flip(compile(broken))
      expect(error.problems).toEqual([
        `entity "Note": field "text" is deprecated in favour of unknown field "body"`,
        `entity "Note": deprecates unknown field "gone"`,
        `entity "Memo": deprecated in favour of unknown entity "Nope"`,
        `operation "Note.jot": deprecated in favour of unknown operation "Note.write"`
      ])
    }))
})

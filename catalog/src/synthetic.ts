/**
 * A synthetic root schema of `n` entities (each with fields, a relationship, an index
 * and two operations) for scale tests: compilation, discovery paging, MCP tool size.
 */
import { Schema } from "effect"
import { Entity, Operation, RootSchema, Trait } from "@cairn/catalog"

export const synthetic = (n: number) => {
  const Stamped = Trait.make("Stamped", { description: "Has a creation time.", fields: { createdAt: Schema.String } })
  const entities = Array.from({ length: n }, (_, i) => {
    const name = `Thing${String(i).padStart(4, "0")}`
    return Entity.make(name, {
      description: `Synthetic entity number ${i} for scale tests. Holds a label, a count and a flag.`,
      traits: [Stamped],
      fields: {
        label: Schema.String,
        count: Schema.Int,
        flag: Schema.Boolean,
        parentId: Schema.optional(Schema.String),
        ...Stamped.fields
      },
      relationships: { parent: Entity.belongsTo(i === 0 ? name : `Thing${String(i - 1).padStart(4, "0")}`, "parentId") },
      indexes: [["label"]]
    })
  })
  const operations = entities.flatMap((e) => [
    Operation.make({
      owner: e,
      name: "create",
      description: `Create a ${e.name}.`,
      targeted: false,
      input: Schema.Struct({ label: Schema.String, count: Schema.Int }),
      output: Schema.Struct({ id: Schema.String })
    }),
    Operation.make({
      owner: e,
      name: "bump",
      description: `Increment the count of the target ${e.name}.`,
      targeted: true,
      input: Schema.Struct({}),
      output: Schema.Struct({ count: Schema.Int })
    })
  ])
  return RootSchema.make("synthetic", { traits: [Stamped], entities, operations })
}

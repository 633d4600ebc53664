// A small root schema exercising every stored type, nullable fields, literals and a
// two-hop relationship, independent of the tracker so the policy package tests itself.
import { Schema } from "effect"
import { Entity, Operation, RootSchema } from "@cairn/catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"

export const Team = Entity.make("Team", {
  description: "A team.",
  fields: {
    name: Schema.String,
    tier: Schema.Literal("free", "pro"),
    active: Schema.Boolean,
    seats: Schema.Int,
    score: Schema.Number,
    note: Schema.optional(Schema.String)
  }
})

export const Doc = Entity.make("Doc", {
  description: "A document of a team.",
  fields: {
    teamId: Schema.String,
    title: Schema.String,
    rank: Schema.optional(Schema.Int),
    archived: Schema.Boolean,
    ownerSub: Schema.String
  },
  relationships: { team: Entity.belongsTo("Team", "teamId") }
})

export const Grant = Entity.make("Grant", {
  description: "Access of one subject to one document.",
  fields: { docId: Schema.String, subject: Schema.String, level: Schema.Literal("read", "write") },
  relationships: { doc: Entity.belongsTo("Doc", "docId") }
})

export const DocCreate = Operation.make({
  owner: Doc,
  name: "create",
  description: "Create a document.",
  targeted: false,
  input: Schema.Struct({ teamId: Schema.String, title: Schema.String }),
  output: Schema.Struct({ id: Schema.String })
})

export const DocRename = Operation.make({
  owner: Doc,
  name: "rename",
  description: "Rename a document.",
  targeted: true,
  input: Schema.Struct({ title: Schema.String }),
  output: Schema.Struct({})
})

export const GrantAdd = Operation.make({
  owner: Grant,
  name: "add",
  description: "Grant a subject access to a document.",
  targeted: false,
  input: Schema.Struct({ docId: Schema.String, subject: Schema.String, level: Schema.Literal("read", "write"), copyOf: Schema.optional(Schema.String) }),
  output: Schema.Struct({ id: Schema.String })
})

export const shop = RootSchema.make("shop", {
  entities: [Team, Doc, Grant],
  operations: [DocCreate, DocRename, GrantAdd]
})

export const principalOf = (
  subject: string,
  options: { readonly roles?: ReadonlyArray<string>; readonly scopes?: ReadonlyArray<string>; readonly claims?: Record<string, unknown> } = {}
) =>
  new Principal({
    subject,
    roles: options.roles ?? [],
    scopes: options.scopes ?? [],
    claims: { sub: subject, ...options.claims },
    databaseKey: DatabaseKey.make("acme")
  })

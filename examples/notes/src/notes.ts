/**
 * The notes example's definitions, root schema `notes`: one entity, `Note`, written by
 * its author and, in a team database, optionally shared with the team. Descriptions are
 * written for AI agents: each says what a definition is for and what to call next.
 */
import { Schema } from "effect"
import { Entity, Operation, RootSchema } from "@cairn/catalog"

const Timestamp = Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)).annotations({
  description: "ISO-8601 UTC timestamp, set by the server"
})
const Title = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const Body = Schema.String.pipe(Schema.maxLength(20_000))
const Empty = Schema.Struct({})

export const Note = Entity.make("Note", {
  description:
    "A note. You see the notes you wrote and, in a team's notes, those shared with the team. Create one with Note.create; query Note to list them.",
  fields: {
    authorId: Schema.String.annotations({ description: "Subject of the caller who wrote the note, set by the server" }),
    title: Title,
    body: Body,
    shared: Schema.Boolean.annotations({ description: "Shared with the team (team notes only); personal notes are never shared" }),
    createdAt: Timestamp,
    updatedAt: Timestamp
  },
  indexes: [["authorId"], ["shared"]]
})

export const NoteCreate = Operation.make({
  owner: Note,
  name: "create",
  description: "Write a new note; you become its author. Returns its id. Set shared to show it to your team (team notes only).",
  targeted: false,
  input: Schema.Struct({ title: Title, body: Body, shared: Schema.optional(Schema.Boolean) }),
  output: Schema.Struct({ id: Schema.String.annotations({ description: "Id of the new note" }) })
})

export const NoteEdit = Operation.make({
  owner: Note,
  name: "edit",
  description: "Replace the body of the target note. Only its author can edit it.",
  targeted: true,
  input: Schema.Struct({ body: Body }),
  output: Empty
})

export const NoteShare = Operation.make({
  owner: Note,
  name: "share",
  description: "Share the target note with your team (team notes only; only its author). Rejected if it is already shared.",
  targeted: true,
  input: Empty,
  output: Empty
})

export const notes = RootSchema.make("notes", { entities: [Note], operations: [NoteCreate, NoteEdit, NoteShare] })

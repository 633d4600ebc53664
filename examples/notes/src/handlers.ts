/**
 * The notes handlers: authors come from the verified caller and times from the
 * transaction; a personal note can never be shared, whatever the input says.
 */
import { Effect } from "effect"
import { Handler, Handlers } from "@cairn/store"
import { Note, NoteCreate, NoteEdit, NoteShare } from "./notes.js"

const inTeam = (claims: Readonly<Record<string, unknown>>) => claims["cairn_db"] === "teams"

export const notesHandlers = Handlers.make(
  { entities: [Note], operations: [NoteCreate, NoteEdit, NoteShare] },
  {
    "Note.create": ({ input, tx, principal, now }) =>
      input.shared === true && !inTeam(principal.claims)
        ? Handler.reject("Personal notes cannot be shared; write it in your team's notes instead.")
        : Effect.map(
            tx.insert("Note", {
              authorId: principal.subject,
              title: input.title,
              body: input.body,
              shared: input.shared === true,
              createdAt: now,
              updatedAt: now
            }),
            (id) => ({ id })
          ),

    "Note.edit": ({ input, target, tx, now }) => Effect.as(tx.patch("Note", target.id, { body: input.body, updatedAt: now }), {}),

    "Note.share": ({ target, tx, now }) =>
      target.shared
        ? Handler.reject("This note is already shared with your team.")
        : Effect.as(tx.patch("Note", target.id, { shared: true, updatedAt: now }), {})
  }
)

/**
 * The notes policy, unlike the tracker's role and membership rules: a note is its
 * author's alone, except that in a team database a note its author shared is readable
 * by every member of the team. Only the author edits or shares a note; sharing exists
 * only in team databases (the verified `cairn_db` claim names the database deployment).
 */
import { Policy, Rule } from "@cairn/policy"
import { Note, NoteCreate, NoteEdit, NoteShare } from "./notes.js"

const { and, eq, hasClaim, or, principal } = Rule

/** The caller is in a team database: the token's verified selector names `teams`. */
export const inTeam = hasClaim("cairn_db", "teams")

const isAuthor = eq("authorId", principal.subject)

export const notesPolicy = Policy.make({
  entities: [Policy.entity(Note, { read: or(isAuthor, and(inTeam, eq("shared", true))) })],
  operations: [
    Policy.operation(NoteCreate),
    Policy.operation(NoteEdit, { target: isAuthor }),
    Policy.operation(NoteShare, { visible: inTeam, target: isAuthor })
  ]
})

/**
 * The tracker's operation handlers: the rules each operation enforces, over the
 * writer's transactional API. Timestamps come from the transaction's time, authors
 * from the verified caller; refusals carry reasons written for the end user.
 */
import { Effect, Option } from "effect"
import { Handler, Handlers } from "@cairn/store"
import { tracker } from "./tracker.js"

const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/

/** The same words whether the record is absent or hidden from the caller. */
const noAccessible = (entity: string, field: string) =>
  Handler.inaccessible(`No accessible ${entity} has the id given in input.${field}.`)

/** Typed from the root schema: an operation added there needs a handler here, and nothing else. */
export const trackerHandlers = Handlers.make(tracker, {
  "Project.create": ({ input, tx, principal, now }) =>
    Effect.gen(function* () {
      const id = yield* tx.insert("Project", {
        name: input.name,
        ...(input.description !== undefined ? { description: input.description } : {}),
        archived: false,
        createdAt: now,
        updatedAt: now
      })
      const email = principal.claims["email"]
      yield* tx.insert("Member", {
        projectId: id,
        subject: principal.subject,
        role: "owner",
        ...(typeof email === "string" && EMAIL.test(email) && email.length <= 254 ? { email } : {}),
        createdAt: now,
        updatedAt: now
      })
      return { id }
    }),

  "Project.archive": ({ target, tx, now }) =>
    target.archived
      ? Handler.reject("This project is already archived.")
      : Effect.as(tx.patch("Project", target.id, { archived: true, updatedAt: now }), {}),

  "Member.add": ({ input, tx, now }) =>
    Effect.gen(function* () {
      if (Option.isNone(yield* tx.get("Project", input.projectId))) return yield* noAccessible("Project", "projectId")
      const existing = yield* tx.findBy("Member", { subject: input.subject, projectId: input.projectId })
      if (existing.length > 0) return yield* Handler.reject("This user is already a member of the project.")
      const id = yield* tx.insert("Member", { ...input, createdAt: now, updatedAt: now })
      return { id }
    }),

  "Task.create": ({ input, tx, now }) =>
    Effect.gen(function* () {
      const project = yield* tx.get("Project", input.projectId)
      if (Option.isNone(project)) return yield* noAccessible("Project", "projectId")
      if (project.value.archived) return yield* Handler.reject("This project is archived and accepts no new tasks.")
      const id = yield* tx.insert("Task", { ...input, status: "open", createdAt: now, updatedAt: now })
      return { id }
    }),

  "Task.rename": ({ input, target, tx, now }) => Effect.as(tx.patch("Task", target.id, { title: input.title, updatedAt: now }), {}),

  "Task.complete": ({ target, tx, now }) =>
    target.status === "done"
      ? Handler.reject("This task is already done.")
      : Effect.as(tx.patch("Task", target.id, { status: "done", updatedAt: now }), {}),

  "Task.reopen": ({ target, tx, now }) =>
    target.status === "open"
      ? Handler.reject("This task is already open.")
      : Effect.as(tx.patch("Task", target.id, { status: "open", updatedAt: now }), {}),

  "Task.assign": ({ input, target, tx, now }) =>
    Effect.as(tx.patch("Task", target.id, { assigneeId: input.assigneeId, updatedAt: now }), {}),

  "Comment.add": ({ input, tx, principal, now }) =>
    Effect.gen(function* () {
      if (Option.isNone(yield* tx.get("Task", input.taskId))) return yield* noAccessible("Task", "taskId")
      const id = yield* tx.insert("Comment", { ...input, authorId: principal.subject, createdAt: now, updatedAt: now })
      return { id }
    }),

  "Comment.edit": ({ input, target, tx, principal, now }) =>
    target.authorId !== principal.subject
      ? Handler.reject("Only the author of a comment can edit it.")
      : Effect.as(tx.patch("Comment", target.id, { body: input.body, updatedAt: now }), {})
})

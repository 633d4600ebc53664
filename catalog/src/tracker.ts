/**
 * The example application: a small issue tracker, root schema `tracker`. It is the
 * fixture every test and demo uses. Descriptions are written for AI agents: each says
 * what a definition is for and what to call next.
 */
import { Schema } from "effect"
import { Entity, Operation, RootSchema, Trait } from "@cairn/catalog"

const Timestamp = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/)
).annotations({ description: "ISO-8601 UTC timestamp, e.g. 2026-01-31T09:30:00.000Z" })

const CalendarDate = Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}$/)).annotations({
  description: "Calendar date YYYY-MM-DD"
})

const RecordId = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)).annotations({
  description: "Id of an existing record, as returned by a create operation or a query"
})

const Title = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const Body = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(10_000))
const Email = Schema.String.pipe(Schema.pattern(/^[^@\s]+@[^@\s]+\.[^@\s]+$/), Schema.maxLength(254)).annotations({
  description: "E-mail address"
})
const Role = Schema.Literal("owner", "editor", "viewer").annotations({
  description: "owner and editor may change the project's tasks, comments and labels; viewer may only read"
})
const Status = Schema.Literal("open", "done")
const Priority = Schema.Int.pipe(Schema.between(1, 5)).annotations({ description: "1 (highest) to 5 (lowest)" })
const Color = Schema.String.pipe(Schema.pattern(/^#[0-9a-fA-F]{6}$/)).annotations({ description: "Hex color #RRGGBB" })

export const Created = Schema.Struct({ id: Schema.String.annotations({ description: "Id of the new record" }) })

export const Timestamped = Trait.make("Timestamped", {
  description: "Records when a record was created and last changed. Both are set by the server.",
  fields: { createdAt: Timestamp, updatedAt: Timestamp }
})

export const Authored = Trait.make("Authored", {
  description: "Records who wrote a record: authorId is the subject of the caller who created it, set by the server.",
  fields: { authorId: Schema.String }
})

export const Project = Entity.make("Project", {
  description:
    "A project groups tasks, labels and members. Members see a project and its contents; query Project to list the projects you can see.",
  traits: [Timestamped],
  fields: {
    name: Title,
    description: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
    archived: Schema.Boolean.annotations({ description: "Archived projects accept no new tasks." }),
    ...Timestamped.fields
  },
  indexes: [["name"]]
})

export const Member = Entity.make("Member", {
  description:
    "Membership of one subject (a user) in one project, with a role. Only admins can add members; the email is visible to admins only.",
  traits: [Timestamped],
  fields: {
    projectId: RecordId,
    subject: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)).annotations({
      description: "The user's subject identifier, as in their access token"
    }),
    role: Role,
    email: Schema.optional(Email).annotations({ description: "Contact e-mail; absent for a project's creator unless their token carries one" }),
    ...Timestamped.fields
  },
  relationships: { project: Entity.belongsTo("Project", "projectId") },
  indexes: [["subject", "projectId"]]
})

export const Task = Entity.make("Task", {
  description:
    "A unit of work in a project, open or done. Create with Task.create, then rename, assign, complete or reopen it by target id.",
  traits: [Timestamped],
  fields: {
    projectId: RecordId,
    title: Title,
    status: Status,
    assigneeId: Schema.optional(Schema.String).annotations({ description: "Subject of the assigned user, if any" }),
    priority: Schema.optional(Priority),
    dueDate: Schema.optional(CalendarDate),
    ...Timestamped.fields
  },
  relationships: { project: Entity.belongsTo("Project", "projectId") },
  indexes: [["projectId", "status"], ["assigneeId"], ["dueDate"]]
})

export const Comment = Entity.make("Comment", {
  description: "A comment on a task. Its author can edit it with Comment.edit.",
  traits: [Timestamped, Authored],
  fields: {
    taskId: RecordId,
    body: Body,
    ...Authored.fields,
    ...Timestamped.fields
  },
  relationships: { task: Entity.belongsTo("Task", "taskId") }
})

export const Label = Entity.make("Label", {
  description: "A named, colored label available within a project.",
  traits: [Timestamped],
  fields: {
    projectId: RecordId,
    name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(50)),
    color: Color,
    ...Timestamped.fields
  },
  relationships: { project: Entity.belongsTo("Project", "projectId") },
  indexes: [["projectId", "name"]]
})

const Empty = Schema.Struct({})

export const ProjectCreate = Operation.make({
  owner: Project,
  name: "create",
  description: "Create a new project; the caller becomes its owner member. Returns its id; then create tasks in it (admins can add members).",
  targeted: false,
  input: Schema.Struct({ name: Title, description: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))) }),
  output: Created
})

export const ProjectArchive = Operation.make({
  owner: Project,
  name: "archive",
  description: "Archive the target project (admins only). An archived project accepts no new tasks. Rejected if already archived.",
  targeted: true,
  input: Empty,
  output: Empty
})

export const MemberAdd = Operation.make({
  owner: Member,
  name: "add",
  description:
    "Add a user (by subject) to a project with a role: owner, editor or viewer (admins only). Rejected if the subject is already a member.",
  targeted: false,
  input: Schema.Struct({ projectId: RecordId, subject: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)), role: Role, email: Email }),
  output: Created
})

export const TaskCreate = Operation.make({
  owner: Task,
  name: "create",
  description:
    "Create an open task in a project. Returns its id. Rejected if the project is archived. Priority is 1 (highest) to 5; dueDate is YYYY-MM-DD.",
  targeted: false,
  input: Schema.Struct({
    projectId: RecordId,
    title: Title,
    assigneeId: Schema.optional(Schema.String),
    priority: Schema.optional(Priority),
    dueDate: Schema.optional(CalendarDate)
  }),
  output: Created
})

export const TaskRename = Operation.make({
  owner: Task,
  name: "rename",
  description: "Change the title of the target task.",
  targeted: true,
  input: Schema.Struct({ title: Title }),
  output: Empty
})

export const TaskComplete = Operation.make({
  owner: Task,
  name: "complete",
  description: "Mark the target task done. Rejected if it is already done.",
  targeted: true,
  input: Empty,
  output: Empty
})

export const TaskReopen = Operation.make({
  owner: Task,
  name: "reopen",
  description: "Mark the target done task open again. Rejected if it is already open.",
  targeted: true,
  input: Empty,
  output: Empty
})

export const TaskAssign = Operation.make({
  owner: Task,
  name: "assign",
  description: "Assign the target task to a user by subject.",
  targeted: true,
  input: Schema.Struct({ assigneeId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)) }),
  output: Empty
})

export const CommentAdd = Operation.make({
  owner: Comment,
  name: "add",
  description: "Add a comment to a task. The caller becomes its author. Returns its id.",
  targeted: false,
  input: Schema.Struct({ taskId: RecordId, body: Body }),
  output: Created
})

export const CommentEdit = Operation.make({
  owner: Comment,
  name: "edit",
  description: "Replace the body of the target comment. Only its author may edit it.",
  targeted: true,
  input: Schema.Struct({ body: Body }),
  output: Empty
})

export const tracker = RootSchema.make("tracker", {
  traits: [Timestamped, Authored],
  entities: [Project, Member, Task, Comment, Label],
  operations: [
    ProjectCreate,
    ProjectArchive,
    MemberAdd,
    TaskCreate,
    TaskRename,
    TaskComplete,
    TaskReopen,
    TaskAssign,
    CommentAdd,
    CommentEdit
  ]
})

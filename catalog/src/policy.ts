/**
 * The tracker's policy. Admins see and do everything in their org's database. Everyone
 * else sees the projects they are a member of and those projects' members, tasks,
 * comments and labels; owners and editors may change tasks and add comments, authors
 * edit their own comments, viewers only read. Anyone may create a project; the
 * `Project.create` handler makes the creator its owner member, so they see it at once.
 */
import { Policy, Rule } from "@cairn/policy"
import {
  Comment,
  CommentAdd,
  CommentEdit,
  Label,
  Member,
  MemberAdd,
  Project,
  ProjectArchive,
  ProjectCreate,
  Task,
  TaskAssign,
  TaskComplete,
  TaskCreate,
  TaskRename,
  TaskReopen
} from "./tracker.js"

const { and, eq, exists, hasRole, isIn, or, principal } = Rule

const isAdmin = hasRole("admin")

/** The principal has a `Member` row (with one of `roles`, if given) in the project whose id is at `path`. */
const memberOf = (path: Rule.PathLike, roles?: ReadonlyArray<"owner" | "editor" | "viewer">) =>
  exists(
    "Member",
    "projectId",
    path,
    roles === undefined ? eq("subject", principal.subject) : and(eq("subject", principal.subject), isIn("role", roles))
  )

/** Admins, or owners and editors of the project at `path`: those who may change its contents. */
const mayChange = (path: Rule.PathLike) => or(isAdmin, memberOf(path, ["owner", "editor"]))

export const trackerPolicy = Policy.make({
  entities: [
    Policy.entity(Project, { read: or(isAdmin, memberOf("id")) }),
    Policy.entity(Member, { read: or(isAdmin, memberOf("projectId")), fields: { email: isAdmin } }),
    Policy.entity(Task, { read: or(isAdmin, memberOf("projectId")) }),
    Policy.entity(Comment, { read: or(isAdmin, memberOf("task.projectId")) }),
    Policy.entity(Label, { read: or(isAdmin, memberOf("projectId")) })
  ],
  operations: [
    Policy.operation(ProjectCreate),
    Policy.operation(ProjectArchive, { visible: isAdmin }),
    Policy.operation(MemberAdd, { visible: isAdmin }),
    Policy.operation(TaskCreate, { references: { projectId: mayChange("id") } }),
    Policy.operation(TaskRename, { target: mayChange("projectId") }),
    Policy.operation(TaskComplete, { target: mayChange("projectId") }),
    Policy.operation(TaskReopen, { target: mayChange("projectId") }),
    Policy.operation(TaskAssign, { target: mayChange("projectId") }),
    Policy.operation(CommentAdd, { references: { taskId: mayChange("projectId") } }),
    Policy.operation(CommentEdit, {
      target: or(isAdmin, and(eq("authorId", principal.subject), memberOf("task.projectId", ["owner", "editor"])))
    })
  ]
})

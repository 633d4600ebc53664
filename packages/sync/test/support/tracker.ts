/**
 * The tracker for sync tests: its entities, operations, handlers and policy, plus
 * test-only operations (remove a member, change a role, move a task, bulk-create tasks,
 * create a label), a store over a temp directory, and an oracle: what a principal may
 * see, computed from the database with the policy evaluator alone.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Catalog, compile, Operation, RootSchema, RowScope, View } from "@cairn/catalog"
import { type MutateRequest, operationRef, Principal, type Receipt, type SyncScope } from "@cairn/domain"
import { inScopeEffect, Policy } from "@cairn/policy"
import { type Database, Databases, Handler, Handlers, Layout, mutate, OperationCatalog, StoreConfig } from "@cairn/store"
import * as T from "@cairn/tracker"
import { Effect, Layer, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"

const Empty = Schema.Struct({})

export const MemberRemove = Operation.make({
  owner: T.Member,
  name: "remove",
  description: "Remove the target membership (test only).",
  targeted: true,
  input: Empty,
  output: Empty
})
export const MemberSetRole = Operation.make({
  owner: T.Member,
  name: "setRole",
  description: "Change the role of the target membership (test only).",
  targeted: true,
  input: Schema.Struct({ role: Schema.Literal("owner", "editor", "viewer") }),
  output: Empty
})
export const TaskMove = Operation.make({
  owner: T.Task,
  name: "move",
  description: "Move the target task to another project (test only).",
  targeted: true,
  input: Schema.Struct({ projectId: Schema.String }),
  output: Empty
})
export const TaskCreateMany = Operation.make({
  owner: T.Task,
  name: "createMany",
  description: "Create `count` open tasks in a project in one commit (test only).",
  targeted: false,
  input: Schema.Struct({ projectId: Schema.String, count: Schema.Int, prefix: Schema.String }),
  output: Empty
})
export const LabelCreate = Operation.make({
  owner: T.Label,
  name: "create",
  description: "Create a label (test only).",
  targeted: false,
  input: Schema.Struct({ projectId: Schema.String, name: Schema.String, color: Schema.String }),
  output: T.Created
})

const entities = [T.Project, T.Member, T.Task, T.Comment, T.Label] as const
const operations = [
  T.ProjectCreate,
  T.ProjectArchive,
  T.MemberAdd,
  MemberRemove,
  MemberSetRole,
  T.TaskCreate,
  T.TaskRename,
  T.TaskComplete,
  T.TaskReopen,
  T.TaskAssign,
  TaskMove,
  TaskCreateMany,
  T.CommentAdd,
  T.CommentEdit,
  LabelCreate
] as const

export const root = RootSchema.make("tracker", { traits: [T.Timestamped, T.Authored], entities: [...entities], operations: [...operations] })

const stamp = (now: string) => ({ createdAt: now, updatedAt: now })

type Ctx = Handler.HandlerContext

/** The tracker's own handlers, plus the test-only operations. */
export const handlers: Handlers.Handlers = {
  ...T.trackerHandlers,
  "Member.remove": ({ target, tx }: Ctx) => Effect.as(tx.delete("Member", target.id), {}),
  "Member.setRole": ({ input, target, tx, now }: Ctx) => Effect.as(tx.patch("Member", target.id, { role: input.role, updatedAt: now }), {}),
  "Task.move": ({ input, target, tx, now }: Ctx) => Effect.as(tx.patch("Task", target.id, { projectId: input.projectId, updatedAt: now }), {}),
  "Task.createMany": ({ input, tx, now }: Ctx) =>
    Effect.as(
      Effect.forEach(
        Array.from({ length: input.count }, (_, i) => i),
        (i) => tx.insert("Task", { projectId: input.projectId, title: `${input.prefix} ${i}`, status: "open", priority: 1 + (i % 5), ...stamp(now) }),
        { discard: true }
      ),
      {}
    ),
  "Label.create": ({ input, tx, now }: Ctx) => Effect.map(tx.insert("Label", { ...input, ...stamp(now) }), (id) => ({ id }))
}

export interface Tracker {
  readonly catalog: Catalog
  readonly policy: Policy.CompiledPolicy
}

export const tracker: Effect.Effect<Tracker> = Effect.gen(function* () {
  const catalog = yield* compile(root)
  const policy = yield* Policy.compile(catalog, T.trackerPolicy)
  return { catalog: policy.catalog, policy }
}).pipe(Effect.orDie, Effect.cached, Effect.runSync)

/** A temp directory removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-sync-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** `Databases` over the test tracker in `dataDir`. */
export const storeLayer = (dataDir: string) =>
  Databases.Default.pipe(
    Layer.provide(StoreConfig.layer({ dataDir })),
    Layer.provide(OperationCatalog.layer(Effect.map(tracker, (t) => t.catalog), handlers))
  )

export const ORG = "org-acme"

export const who = (subject: string, options: { readonly roles?: ReadonlyArray<string>; readonly org?: string } = {}) =>
  new Principal({ subject, roles: options.roles ?? [], claims: {}, scopes: [], databaseKey: options.org ?? ORG })

export const viewOf = (principal: Principal) => Effect.map(tracker, (t) => t.policy.view(principal))

/** Runs one operation as `principal`, bypassing policy (tests set up data freely); a refusal is a defect. */
export const run = (principal: Principal, owner: string, name: string, input: unknown, target?: string) =>
  Effect.orDie(attempt(principal, owner, name, input, target))

/** `run`, answering the operation's refusal as a failure. */
export const attempt = (principal: Principal, owner: string, name: string, input: unknown, target?: string) =>
  Effect.gen(function* () {
    const { catalog } = yield* tracker
    const request: MutateRequest = {
      operation: operationRef(owner, name),
      input,
      invocationId: uuidv7(),
      ...(target !== undefined ? { target: { kind: "entity", entity: owner, id: target } } : {})
    }
    return yield* mutate({ view: View.full(catalog), principal, request })
  })

export const idOf = (receipt: Receipt) => (receipt.output as { readonly id: string }).id

export const everything: SyncScope = {
  entities: ["Project", "Member", "Task", "Comment", "Label"].map((name) => ({ from: { kind: "entity" as const, name } }))
}

/**
 * The oracle: every record of the scope's entities `principal` may read, with only
 * the fields they see, keyed `entity/id`, computed from the current rows.
 */
export const visibleTo = (database: Database, principal: Principal, scope: SyncScope = everything) =>
  Effect.gen(function* () {
    const { catalog, policy } = yield* tracker
    const view = policy.view(principal)
    const lookup = (entity: string, field: string, value: unknown) =>
      Effect.map(
        database.reader.unsafe<Record<string, unknown>>(
          `SELECT * FROM ${Layout.tableName(entity)} WHERE ${Layout.quote(field)} = ?`,
          [typeof value === "boolean" ? (value ? 1 : 0) : value]
        ),
        (rows) => rows.map((r) => Layout.decodeRecord(catalog.entity(entity)!, r))
      )
    const out = new Map<string, Record<string, unknown>>()
    for (const { from, where } of scope.entities) {
      const entity = view.entity(from.name)
      if (!entity) continue
      const rows = yield* database.reader.unsafe<Record<string, unknown>>(`SELECT * FROM ${Layout.tableName(entity)}`)
      for (const row of rows) {
        const record = Layout.decodeRecord(entity, row)
        if (!(yield* inScopeEffect(catalog, entity.name, view.rowScope(entity.name), record, lookup))) continue
        if (where && !(yield* inScopeEffect(catalog, entity.name, RowScope.where(where), record, lookup))) continue
        const visible: Record<string, unknown> = { id: record["id"] }
        for (const f of view.fields(entity)) if (record[f.name] !== undefined) visible[f.name] = record[f.name]
        out.set(`${entity.name}/${record["id"] as string}`, visible)
      }
    }
    return out
  }).pipe(Effect.orDie)

/** The database of `org` for the life of the scope. */
export const database = (org = ORG) => Effect.flatMap(Databases, (d) => d.activate(org)).pipe(Effect.orDie)

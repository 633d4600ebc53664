/**
 * The tracker for sync tests: its entities, operations, handlers and policy, plus
 * test-only operations (remove a member, change a role, move a task, bulk-create tasks,
 * create a label), a store over a temp directory, and an oracle: what a principal may
 * see, computed from the database with the policy evaluator alone.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Operation, RootSchema } from "@cairn/catalog"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import { type SyncScope } from "@cairn/domain/Sync"
import { Policy } from "@cairn/policy"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { type Handler, type Handlers } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { type Database, Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig, type StoreConfigShape } from "@cairn/store/StoreConfig"
import { trackerHandlers } from "@cairn/testkit/fixture/handlers"
import { trackerPolicy } from "@cairn/testkit/fixture/policy"
import * as T from "@cairn/testkit/fixture/tracker"
import { Effect, Layer, Redacted, Schema } from "effect"
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
  ...trackerHandlers,
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
  const policy = yield* Policy.compile(catalog, trackerPolicy)
  return { catalog: policy.catalog, policy }
}).pipe(Effect.orDie, Effect.cached, Effect.runSync)

/** A temp directory removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-sync-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/**
 * `Databases` over the test tracker in `dataDir`. Tests only: every invocation is allowed,
 * so tests set up data freely; sync applies the policy on the way out.
 */
export const storeLayer = (dataDir: string, config: Partial<StoreConfigShape> = {}) =>
  Databases.Default.pipe(
    Layer.provide(StoreConfig.layer({ ...config, dataDir })),
    Layer.provide(Archive.local),
    Layer.provide(OperationCatalog.layer(Effect.map(tracker, (t) => t.catalog), handlers)),
    Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void }))
  )

export const ORG = "org-acme"

export const who = (subject: string, options: { readonly roles?: ReadonlyArray<string>; readonly org?: string } = {}) =>
  new Principal({ subject, roles: options.roles ?? [], claims: {}, scopes: [], databaseKey: DatabaseKey.make(options.org ?? ORG) })

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
      invocationId: InvocationId.make(uuidv7()),
      ...(target !== undefined ? { target: { kind: "entity", entity: owner, id: target } } : {})
    }
    return yield* Effect.scoped(
      Effect.flatMap(
        Effect.flatMap(Databases, (d) => d.activate(principal.databaseKey)),
        (database) => mutate({ view: View.full(catalog), principal, request, database })
      )
    )
  })

export const idOf = (receipt: Receipt) => (receipt.output as { readonly id: string }).id

export const everything: SyncScope = {
  entities: ["Project", "Member", "Task", "Comment", "Label"].map((name) => ({ from: { kind: "entity" as const, name } }))
}

/**
 * The oracle: a fresh authorized query as `principal` (the query planner, paging through
 * every record of each entity in the scope, with the scope's filter), keyed `entity/id`,
 * absent optional fields left out as sync leaves them out.
 */
export const visibleTo = (database: Database, principal: Principal, scope: SyncScope = everything) =>
  Effect.gen(function* () {
    const { policy } = yield* tracker
    const planner = yield* QueryPlanner
    const view = policy.view(principal)
    const out = new Map<string, Record<string, unknown>>()
    for (const { from, where } of scope.entities) {
      const entity = view.entity(from.name)
      if (!entity) continue
      const names = ["id", ...view.fields(entity).map((f) => f.name)]
      let after: string | undefined
      do {
        const result = yield* planner.run({
          view,
          principal,
          database: { id: database.id, sql: database.reader },
          request: {
            query: {
              version: 1,
              from,
              ...(where ? { where } : {}),
              select: Object.fromEntries(names.map((n) => [n, { path: [n] }])),
              page: { first: 200, ...(after ? { after } : {}) }
            }
          }
        })
        for (const row of result.rows) {
          out.set(`${entity.name}/${row["id"] as string}`, Object.fromEntries(Object.entries(row).filter(([, v]) => v !== null)))
        }
        after = result.cursor
      } while (after !== undefined)
    }
    return out
  }).pipe(
    Effect.provide([QueryPlanner.Default.pipe(Layer.provide(Sealer.layer(Redacted.make("oracle-secret-0123456789abcdef")))), QueryLimits.layer()]),
    Effect.orDie
  )

/** The database of `org` for the life of the scope. */
export const database = (org = ORG) => Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(org))).pipe(Effect.orDie)

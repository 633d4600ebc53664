// fast-check generators of tracker data (projects, memberships, tasks with NULLs,
// ties, dangling references and non-ASCII text) and of Task queries over it.
import fc from "fast-check"
import { RowScope } from "@cairn/catalog"
import { View } from "@cairn/catalog/View"
import type { Direction, Filter, Path, QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import type { RecordValue } from "@cairn/policy/Evaluate"
import { catalog, type Data } from "./support.js"

const titles = ["a", "ab", "abc", "B", "b", "é", "éa", "Zed", "a b", "10", "9"]
const names = ["alpha", "beta", "Alpha", "é"]
const dates = ["2025-12-31", "2026-01-01", "2026-02-01"]
const stamps = ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]
const subjects = ["u1", "u2", "u3"]
const projectIds = ["P0", "P1", "P2", "P3", "PX"]

const optional = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: undefined, freq: 3 })

export const taskArb = fc.record({
  projectId: fc.constantFrom(...projectIds),
  title: fc.constantFrom(...titles),
  status: fc.constantFrom("open", "done"),
  assigneeId: optional(fc.constantFrom(...subjects)),
  priority: optional(fc.integer({ min: 1, max: 5 })),
  dueDate: optional(fc.constantFrom(...dates)),
  createdAt: fc.constantFrom(...stamps),
  updatedAt: fc.constantFrom(...stamps)
})
export type TaskFields = typeof taskArb extends fc.Arbitrary<infer A> ? A : never

/** A task record with its id, dropping absent optional fields. */
export const taskRecord = (id: string, fields: TaskFields): RecordValue =>
  Object.fromEntries(Object.entries({ id, ...fields }).filter(([, v]) => v !== undefined))

export const dataArb = fc
  .record({
    projects: fc.array(
      fc.record({
        name: fc.constantFrom(...names),
        archived: fc.boolean(),
        description: optional(fc.constantFrom("x", "yz"))
      }),
      { minLength: 1, maxLength: 4 }
    ),
    aliceIn: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
    tasks: fc.array(taskArb, { maxLength: 40, size: "max" }),
    ids: fc.uniqueArray(fc.integer({ min: 0, max: 999 }), { minLength: 40, maxLength: 40 })
  })
  .map(({ aliceIn, ids, projects, tasks }): Data => ({
    Project: projects.map((p, i) =>
      Object.fromEntries(
        Object.entries({ id: `P${i}`, ...p, createdAt: stamps[0], updatedAt: stamps[0] }).filter(([, v]) => v !== undefined)
      )
    ),
    Member: projects.flatMap((_, i) =>
      aliceIn[i]
        ? [{ id: `M${i}`, projectId: `P${i}`, subject: "alice", role: "viewer", createdAt: stamps[0], updatedAt: stamps[0] }]
        : [{ id: `M${i}`, projectId: `P${i}`, subject: "bob", role: "owner", createdAt: stamps[0], updatedAt: stamps[0] }]
    ),
    Task: tasks.map((t, i) => taskRecord(`t${ids[i]}`, t))
  }))

const cmp = (path: Path, ops: ReadonlyArray<"eq" | "ne" | "lt" | "lte" | "gt" | "gte" | "startsWith" | "contains">, value: fc.Arbitrary<string | number | boolean>) =>
  fc.record({ op: fc.constantFrom(...ops), path: fc.constant(path), value })
const set = (path: Path, value: fc.Arbitrary<string | number | boolean>) =>
  fc.record({ op: fc.constantFrom("in" as const, "notIn" as const), path: fc.constant(path), value: fc.array(value, { maxLength: 3 }) })
const isNull = (path: Path) => fc.constant({ op: "isNull" as const, path })
const ordering = ["eq", "ne", "lt", "lte", "gt", "gte"] as const

const leaf: fc.Arbitrary<Filter> = fc.oneof(
  cmp(["title"], [...ordering, "startsWith", "contains"], fc.constantFrom(...titles, "")),
  set(["title"], fc.constantFrom(...titles)),
  cmp(["status"], ["eq", "ne"], fc.constantFrom("open", "done")),
  set(["status"], fc.constantFrom("open", "done")),
  cmp(["assigneeId"], ordering, fc.constantFrom(...subjects)),
  isNull(["assigneeId"]),
  set(["assigneeId"], fc.constantFrom(...subjects)),
  cmp(["priority"], ordering, fc.integer({ min: 0, max: 6 })),
  isNull(["priority"]),
  set(["priority"], fc.integer({ min: 1, max: 5 })),
  cmp(["dueDate"], ordering, fc.constantFrom(...dates)),
  isNull(["dueDate"]),
  cmp(["projectId"], ["eq", "ne"], fc.constantFrom(...projectIds)),
  cmp(["id"], ["eq", "lt", "gt"], fc.constantFrom("t1", "t5", "t50", "t500")),
  cmp(["project", "name"], ["eq", "ne", "lt", "startsWith"], fc.constantFrom(...names)),
  cmp(["project", "archived"], ["eq", "ne"], fc.boolean()),
  isNull(["project", "description"]),
  cmp(["project", "description"], ["contains"], fc.constantFrom("x", "y", ""))
)

const { filter } = fc.letrec<{ filter: Filter }>((tie) => ({
  filter: fc.oneof(
    { depthSize: "small", maxDepth: 3 },
    leaf,
    fc.record({ op: fc.constant("and" as const), filters: fc.array(tie("filter"), { maxLength: 3 }) }),
    fc.record({ op: fc.constant("or" as const), filters: fc.array(tie("filter"), { maxLength: 3 }) }),
    fc.record({ op: fc.constant("not" as const), filter: tie("filter") })
  )
}))

/** Equalities on indexed fields, so the index-walk and seek plans are exercised too. */
const indexedEq: fc.Arbitrary<Filter> = fc.oneof(
  fc.record({ op: fc.constant("eq" as const), path: fc.constant(["projectId"]), value: fc.constantFrom(...projectIds) }),
  fc.record({ op: fc.constant("eq" as const), path: fc.constant(["status"]), value: fc.constantFrom("open", "done") }),
  fc.record({ op: fc.constant("eq" as const), path: fc.constant(["assigneeId"]), value: fc.constantFrom(...subjects) }),
  fc.record({ op: fc.constant("eq" as const), path: fc.constant(["dueDate"]), value: fc.constantFrom(...dates) }),
  isNull(["dueDate"]),
  isNull(["assigneeId"])
)

export const whereArb: fc.Arbitrary<Filter | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 3 },
  { arbitrary: filter, weight: 3 },
  { arbitrary: fc.record({ op: fc.constant("and" as const), filters: fc.tuple(indexedEq, indexedEq, filter).map((t) => [...t]) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("and" as const), filters: fc.tuple(indexedEq, filter).map((t) => [...t]) }), weight: 1 },
  { arbitrary: indexedEq, weight: 2 }
)

const orderPaths: ReadonlyArray<Path> = [["title"], ["status"], ["priority"], ["dueDate"], ["assigneeId"], ["project", "name"], ["createdAt"], ["id"], ["projectId"]]

export const orderArb = fc.oneof(
  fc.array(fc.record({ path: fc.constantFrom(...orderPaths), direction: fc.constantFrom<Direction>("asc", "desc") }), { maxLength: 3 }),
  // One direction throughout: the shape an index walk can serve.
  fc
    .tuple(fc.array(fc.constantFrom(...orderPaths), { maxLength: 2 }), fc.constantFrom<Direction>("asc", "desc"))
    .map(([paths, direction]) => paths.map((path) => ({ path, direction })))
)

const selectPaths: Record<string, Path> = {
  title: ["title"],
  status: ["status"],
  priority: ["priority"],
  due: ["dueDate"],
  assignee: ["assigneeId"],
  project: ["project", "name"],
  archived: ["project", "archived"],
  projectDescription: ["project", "description"]
}

export const selectArb = fc
  .subarray(Object.keys(selectPaths))
  .map((keys) => Object.fromEntries([["id", { path: ["id"] }], ...keys.map((k) => [k, { path: selectPaths[k]! }])]))

export const queryArb: fc.Arbitrary<QueryDocumentV1> = fc
  .record({ where: whereArb, order: orderArb, select: selectArb, first: fc.integer({ min: 1, max: 8 }) })
  .map(({ first, order, select, where }) => ({
    version: 1 as const,
    from: { kind: "entity" as const, name: "Task" },
    ...(where === undefined ? {} : { where }),
    select,
    order,
    page: { first }
  }))

const aliceMember = (path: Path): RowScope.ScopeFilter => ({
  op: "exists",
  entity: "Member",
  field: "projectId",
  path,
  where: { op: "eq", path: ["subject"], value: "alice" }
})

/**
 * A policy-like view for "alice": projects she is a member of, and tasks in them or
 * assigned to u1 (so some visible tasks point at projects she cannot see).
 */
export const aliceView = new View(catalog, {
  entity: () => true,
  field: () => true,
  operation: () => true,
  rowScope: (entity) =>
    entity === "Project"
      ? RowScope.where(aliceMember(["id"]))
      : entity === "Task"
        ? RowScope.where({ op: "or", filters: [aliceMember(["projectId"]), { op: "eq", path: ["assigneeId"], value: "u1" }] })
        : entity === "Comment"
          ? RowScope.where(aliceMember(["task", "projectId"]))
          : RowScope.all
})

// Compile-time checks of the generated bindings (type-checked by `tsc -b`; never run):
// each `@ts-expect-error` fails the build if the bindings stop rejecting that mistake.
import type { Effect } from "effect"
import type { CairnClient } from "../src/CairnClient.js"
import { tracker } from "../src/generated/tracker.js"

type Success<T> = T extends Effect.Effect<infer A, any, any> ? A : never
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
const assertType = <T extends true>(_: T) => _

const query = tracker.Task.query({
  select: { title: { path: ["title"] }, project: { path: ["project", "name"] }, priority: { path: ["priority"] } },
  where: { op: "and", filters: [{ op: "eq", path: ["status"], value: "open" }, { op: "gte", path: ["priority"], value: 2 }] },
  order: [{ path: ["dueDate"], direction: "asc" }],
  page: { first: 10 }
})
type Row = Success<typeof query>["rows"][number]
assertType<Equal<Row, { readonly title: string; readonly project: string | null; readonly priority: number | null }>>(true)
assertType<Equal<Effect.Effect.Context<typeof query>, CairnClient>>(true)

// Two hops through relationships: Comment -> Task -> Project.
tracker.Comment.query({ select: { project: { path: ["task", "project", "archived"] } } })
// @ts-expect-error unknown field
tracker.Task.query({ select: { x: { path: ["titel"] } } })
// @ts-expect-error a relationship is not a value
tracker.Task.query({ select: { x: { path: ["project"] } } })
// @ts-expect-error the value's type follows the field
tracker.Task.query({ select: {}, where: { op: "eq", path: ["status"], value: "closed" } })

const completed = tracker.Task.complete({ target: "t1" })
assertType<Equal<Success<typeof completed>["output"], Record<string, never>>>(true)
const created = tracker.Task.create({ input: { projectId: "p1", title: "Write tests", priority: 2 } })
assertType<Equal<Success<typeof created>["output"], { readonly id: string }>>(true)
// @ts-expect-error targeted operations need a target
tracker.Task.rename({ input: { title: "x" } })
// @ts-expect-error inputs are checked against the operation's schema
tracker.Task.rename({ target: "t1", input: { name: "x" } })
// @ts-expect-error required input fields cannot be left out
tracker.Task.create({ input: { title: "no project" } })
// @ts-expect-error operations are per entity
tracker.Label.complete({ target: "l1" })

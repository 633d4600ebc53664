/**
 * Random rows of the shop fixture and random `Doc` filters over them (relationship paths,
 * exists, NULLs, empty lists, UTF-8 ordering), shared by the evaluator's property tests.
 */
import fc from "fast-check"
import type { RowScope } from "@cairn/catalog"
import type { Scalar } from "@cairn/domain/QueryDocument"
import type { RecordValue } from "@cairn/policy/Evaluate"

type ScopeFilter = RowScope.ScopeFilter

export interface Data {
  readonly Team: ReadonlyArray<RecordValue>
  readonly Doc: ReadonlyArray<RecordValue>
  readonly Grant: ReadonlyArray<RecordValue>
}

const texts = ["a", "ab", "B", "b", "", "é", "😀", "\uE000", "10"]
const text = fc.constantFrom(...texts)
const int = fc.integer({ min: -1, max: 3 })
const ids = (prefix: string) => fc.constantFrom(`${prefix}1`, `${prefix}2`, `${prefix}3`, `${prefix}x`)

export const dataArb: fc.Arbitrary<Data> = fc.record({
  Team: fc.uniqueArray(
    fc.record({
      id: fc.constantFrom("t1", "t2", "t3"),
      name: text,
      tier: fc.constantFrom("free", "pro"),
      active: fc.boolean(),
      seats: int,
      score: fc.constantFrom(-1.5, 0, 2.25),
      note: fc.option(text, { nil: undefined })
    }),
    { selector: (t) => t.id, maxLength: 3 }
  ),
  Doc: fc.uniqueArray(
    fc.record({
      id: fc.constantFrom("d1", "d2", "d3", "d4", "d5"),
      teamId: ids("t"),
      title: text,
      rank: fc.option(int, { nil: undefined }),
      archived: fc.boolean(),
      ownerSub: fc.constantFrom("alice", "bob")
    }),
    { selector: (d) => d.id, maxLength: 5 }
  ),
  Grant: fc.uniqueArray(
    fc.record({ id: fc.constantFrom("g1", "g2", "g3", "g4"), docId: ids("d"), subject: fc.constantFrom("alice", "bob"), level: fc.constantFrom("read", "write") }),
    { selector: (g) => g.id, maxLength: 4 }
  )
}).map((d) => JSON.parse(JSON.stringify(d)) as Data)

const comparisonOps = ["eq", "ne", "lt", "lte", "gt", "gte"] as const
const leaf = (fields: ReadonlyArray<{ path: ReadonlyArray<string>; value: fc.Arbitrary<Scalar>; text?: boolean; nullable?: boolean }>): fc.Arbitrary<ScopeFilter> =>
  fc.constantFrom(...fields).chain((f) =>
    fc.oneof(
      fc.record({ op: fc.constantFrom(...comparisonOps, ...(f.text ? (["startsWith", "contains"] as const) : [])), path: fc.constant(f.path), value: f.value }),
      fc.record({ op: fc.constantFrom("in" as const, "notIn" as const), path: fc.constant(f.path), value: fc.array(f.value, { maxLength: 3 }) }),
      ...(f.nullable ? [fc.constant<ScopeFilter>({ op: "isNull", path: f.path })] : [])
    ) as fc.Arbitrary<ScopeFilter>
  )

const grantLeaf = leaf([
  { path: ["subject"], value: fc.constantFrom("alice", "bob"), text: true },
  { path: ["level"], value: fc.constantFrom("read", "write") },
  { path: ["doc", "title"], value: text, text: true }
])

const docLeaf = leaf([
  { path: ["title"], value: text, text: true },
  { path: ["rank"], value: int, nullable: true },
  { path: ["archived"], value: fc.boolean() },
  { path: ["id"], value: ids("d"), text: true },
  { path: ["team", "name"], value: text, text: true, nullable: true },
  { path: ["team", "seats"], value: int, nullable: true },
  { path: ["team", "note"], value: text, text: true, nullable: true },
  { path: ["team", "active"], value: fc.boolean(), nullable: true }
])

export const { filter: docFilter } = fc.letrec<{ filter: ScopeFilter; grant: ScopeFilter }>((tie) => ({
  filter: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    docLeaf,
    fc.record({ op: fc.constantFrom("and" as const, "or" as const), filters: fc.array(tie("filter"), { maxLength: 3 }) }),
    fc.record({ op: fc.constant("not" as const), filter: tie("filter") }),
    fc.record({ op: fc.constant("exists" as const), entity: fc.constant("Grant"), field: fc.constant("docId"), path: fc.constant(["id"]), where: tie("grant") }),
    fc.constant<ScopeFilter>({ op: "exists", entity: "Team", field: "id", path: ["teamId"] })
  ) as fc.Arbitrary<ScopeFilter>,
  grant: fc.oneof(
    { depthSize: "small" },
    grantLeaf,
    fc.record({ op: fc.constantFrom("and" as const, "or" as const), filters: fc.array(tie("grant"), { maxLength: 2 }) }),
    fc.record({ op: fc.constant("not" as const), filter: tie("grant") })
  ) as fc.Arbitrary<ScopeFilter>
}))

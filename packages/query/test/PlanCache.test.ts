// The parameterized plan cache: a plan is shared by documents of one shape and views of
// one policy class (subject-dependent row scopes bound as values), never across classes;
// new values on a cached shape read the right rows and fail exactly as uncached ones.
import { assert, describe, it as plainIt, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import fc from "fast-check"
import { canonicalJson } from "@cairn/catalog/Digest"
import { type View } from "@cairn/catalog/View"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { Policy } from "@cairn/policy"
import { defaultQueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { trackerPolicy } from "@cairn/testkit/fixture/policy"
import { isError, plan } from "../src/internal/plan.js"
import * as PlanCache from "../src/internal/planCache.js"
import { rowBuilder } from "../src/internal/rows.js"
import { queryArb } from "./arbitraries.js"
import { catalog, clear, type Data, fullView, insert, TestLive } from "./support.js"

const at = "2026-01-01T00:00:00.000Z"
const stamp = { createdAt: at, updatedAt: at }
const policy = Effect.runSync(Policy.compile(catalog, trackerPolicy))

const person = (subject: string, roles: ReadonlyArray<string> = [], jti = "1") =>
  new Principal({ subject, roles, scopes: [], claims: { sub: subject, jti }, databaseKey: DatabaseKey.make("acme") })

const data: Data = {
  Project: [
    { id: "P1", name: "one", archived: false, ...stamp },
    { id: "P2", name: "two", archived: false, ...stamp }
  ],
  Member: [
    { id: "M1", projectId: "P1", subject: "alice", role: "owner", ...stamp },
    { id: "M2", projectId: "P2", subject: "bob", role: "owner", ...stamp }
  ],
  Task: [
    { id: "T1", projectId: "P1", title: "a open", status: "open", priority: 1, ...stamp },
    { id: "T2", projectId: "P1", title: "a done", status: "done", priority: 2, ...stamp },
    { id: "T3", projectId: "P2", title: "b open", status: "open", priority: 3, ...stamp },
    { id: "T4", projectId: "P2", title: "b done", status: "done", priority: 4, ...stamp },
    { id: "T5", projectId: "P2", title: "b open 2", status: "open", priority: 5, ...stamp }
  ]
}

const seed = Effect.gen(function* () {
  yield* clear
  for (const [entity, records] of Object.entries(data)) yield* insert(entity, records)
})

const doc = (query: Omit<QueryDocumentV1, "version" | "from">): QueryDocumentV1 => ({ version: 1, from: { kind: "entity", name: "Task" }, ...query })

const byStatus = (status: unknown, first?: number, after?: string): QueryDocumentV1 =>
  doc({
    where: { op: "eq", path: ["status"], value: status as string },
    select: { id: { path: ["id"] }, title: { path: ["title"] } },
    order: [{ path: ["priority"], direction: "asc" }],
    ...(first === undefined ? {} : { page: { first, ...(after === undefined ? {} : { after }) } })
  })

const run = (principal: Principal, query: QueryDocumentV1, view: View = policy.view(principal)) =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    return yield* planner.run({ view, principal, database: { id: "db-1", sql }, request: { query } })
  })

const ids = (rows: ReadonlyArray<Record<string, unknown>>) => rows.map((r) => r["id"])

const failure = <A>(effect: Effect.Effect<A, PublicError, any>) =>
  Effect.map(Effect.either(effect), (e) => (Either.isLeft(e) ? toPublicBody(e.left) : assert.fail("expected a failure")))

layer(TestLive)("plan cache", (it) => {
  it.effect("principals of one policy class share a plan, each reading only their own rows", () =>
    Effect.gen(function* () {
      yield* seed
      const planner = yield* QueryPlanner
      const before = planner.cachedPlans()
      const alice = PlanCache.classOf(policy.view(person("alice")))!
      const bob = PlanCache.classOf(policy.view(person("bob")))!
      assert.strictEqual(alice.key, bob.key)
      assert.notDeepEqual(alice.values, bob.values)
      assert.deepStrictEqual(ids((yield* run(person("alice"), byStatus("open"))).rows), ["T1"])
      assert.deepStrictEqual(ids((yield* run(person("bob"), byStatus("open"))).rows), ["T3", "T5"])
      // A new principal object, other values: the same plan.
      assert.deepStrictEqual(ids((yield* run(person("bob", [], "2"), byStatus("done"))).rows), ["T4"])
      assert.deepStrictEqual(ids((yield* run(person("alice", [], "3"), byStatus("done"))).rows), ["T2"])
      assert.deepStrictEqual(ids((yield* run(person("carol"), byStatus("open"))).rows), [])
      assert.strictEqual(planner.cachedPlans(), before + 1)
    }))

  it.effect("another policy class plans anew", () =>
    Effect.gen(function* () {
      yield* seed
      const planner = yield* QueryPlanner
      yield* run(person("alice"), byStatus("open"))
      const before = planner.cachedPlans()
      const admin = person("root", ["admin"])
      assert.notStrictEqual(PlanCache.classOf(policy.view(admin))!.key, PlanCache.classOf(policy.view(person("alice")))!.key)
      assert.deepStrictEqual(ids((yield* run(admin, byStatus("open"))).rows), ["T1", "T3", "T5"])
      assert.strictEqual(planner.cachedPlans(), before + 1)
      assert.deepStrictEqual(ids((yield* run(person("alice"), byStatus("open"))).rows), ["T1"])
      // A view that sees everything and one the policy built are different classes too.
      assert.deepStrictEqual(ids((yield* run(admin, byStatus("done"), fullView)).rows), ["T2", "T4"])
      assert.strictEqual(planner.cachedPlans(), before + 2)
    }))

  it.effect("pages of a cached plan continue with the cursor, for the same person only", () =>
    Effect.gen(function* () {
      yield* seed
      const first = yield* run(person("bob"), byStatus("open", 1))
      assert.deepStrictEqual(ids(first.rows), ["T3"])
      const second = yield* run(person("bob", [], "other token"), byStatus("open", 1, first.cursor))
      assert.deepStrictEqual(ids(second.rows), ["T5"])
      assert.strictEqual(second.cursor, undefined)
      const stranger = yield* failure(run(person("alice"), byStatus("open", 1, first.cursor)))
      assert.strictEqual(stranger.code, "invalid_query")
      // Another value is another query: the cursor does not continue it.
      const other = yield* failure(run(person("bob"), byStatus("done", 1, first.cursor)))
      assert.strictEqual(other.code, "invalid_query")
    }))

  it.effect("invalid values on a cached shape fail exactly as they do uncached", () =>
    Effect.gen(function* () {
      yield* seed
      const bad: ReadonlyArray<QueryDocumentV1> = [
        byStatus("closed"),
        byStatus(7),
        byStatus(null),
        byStatus(true),
        byStatus("open", 500),
        doc({ where: { op: "in", path: ["status"], value: ["open", 3] }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "startsWith", path: ["title"], value: 1 as unknown as string }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "gt", path: ["priority"], value: "high" }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "gt", path: ["priority"], value: Number.NaN }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "eq", path: ["status"], value: { toString: 0 } as unknown as string }, select: { id: { path: ["id"] } } })
      ]
      const good: ReadonlyArray<QueryDocumentV1> = [
        byStatus("open"),
        byStatus("open", 2),
        doc({ where: { op: "in", path: ["status"], value: ["open", "done"] }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "startsWith", path: ["title"], value: "a" }, select: { id: { path: ["id"] } } }),
        doc({ where: { op: "gt", path: ["priority"], value: 2 }, select: { id: { path: ["id"] } } })
      ]
      // What the planner answers without any cache.
      const uncached = bad.map((d) => {
        const planned = plan(policy.view(person("carol")), d, defaultQueryLimits)
        return isError(planned) ? toPublicBody(planned) : assert.fail("expected an error")
      })
      const planner = yield* QueryPlanner
      for (const d of good) yield* run(person("dave"), d)
      const cached = planner.cachedPlans()
      for (const [i, d] of bad.entries()) {
        assert.deepStrictEqual(yield* failure(run(person("dave"), d)), uncached[i], `document ${i}`)
      }
      assert.strictEqual(planner.cachedPlans(), cached)
      // And the shapes still answer good values.
      assert.deepStrictEqual(ids((yield* run(person("bob"), good[2]!)).rows), ["T3", "T4", "T5"])
    }))
})

describe("rows", () => {
  plainIt("are built under exactly the names selected, odd ones included", () => {
    const names = ["__proto__", "constructor", "0", "b", "a", "toString"]
    const build = rowBuilder(names, names.map(() => (v: unknown) => v), [5, 4, 3, 2, 1, 0])
    const row = build(["v0", "v1", "v2", "v3", "v4", "v5"])
    const expected = Object.fromEntries(names.map((n, i) => [n, `v${5 - i}`]))
    assert.deepStrictEqual(Object.keys(row), Object.keys(expected))
    assert.strictEqual(Object.getPrototypeOf(row), Object.prototype)
    for (const n of names) assert.strictEqual(Object.getOwnPropertyDescriptor(row, n)?.value, expected[n])
  })
})

describe("plan cache keys", () => {
  plainIt("a document's shape ignores its values but not its structure", () => {
    const key = (d: QueryDocumentV1) => PlanCache.shapeOf(d, 64)?.key
    assert.strictEqual(key(byStatus("open")), key(byStatus("done")))
    assert.notStrictEqual(key(byStatus("open")), key(byStatus("open", 2)))
    assert.notStrictEqual(key(byStatus("open", 2)), key(byStatus("open", 2, "cursor")))
    const inList = (value: ReadonlyArray<string>) => doc({ where: { op: "in", path: ["status"], value }, select: { id: { path: ["id"] } } })
    assert.strictEqual(key(inList(["a", "b"])), key(inList(["c", "d"])))
    assert.notStrictEqual(key(inList(["a"])), key(inList(["a", "b"])))
    assert.notStrictEqual(key(inList([])), key(inList(["a"])))
    const withExtra = { ...byStatus("open"), where: { op: "eq", path: ["status"], value: "open", extra: 1 } } as unknown as QueryDocumentV1
    assert.strictEqual(key(withExtra), undefined)
    const selectExtra = { ...byStatus("open"), select: { id: { path: ["id"], as: "x" } } } as unknown as QueryDocumentV1
    assert.strictEqual(key(selectExtra), undefined)
    const tricky = (path: Array<string>) => {
      const p = Object.assign([...path], { toJSON: () => ["status"] })
      return doc({ where: { op: "eq", path: p, value: "open" }, select: { id: { path: p } } })
    }
    assert.notStrictEqual(key(tricky(["title"])), key(tricky(["status"])))
    assert.strictEqual(key({ ...byStatus("open"), page: { first: Number.NaN } }), undefined)
  })

  plainIt("the cursor fingerprint of a cached plan is the planner's own", () => {
    fc.assert(
      fc.property(queryArb, (d) => {
        const planned = plan(fullView, d, defaultQueryLimits)
        if (isError(planned)) return
        const cls = PlanCache.classOf(fullView)!
        const entry = PlanCache.makeEntry(fullView, cls, d, planned, defaultQueryLimits)
        assert.strictEqual(PlanCache.fingerprintJson(entry, d), canonicalJson({ v: 1, from: d.from.name, where: d.where ?? null, select: d.select, order: d.order ?? [] }))
      }),
      { numRuns: 300 }
    )
  })
})

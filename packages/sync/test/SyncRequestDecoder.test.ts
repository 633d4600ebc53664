import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { decodeQueryRequest } from "@cairn/query/QueryRequestDecoder"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { decodeChangesRequest, decodeSnapshotRequest } from "@cairn/sync/SyncRequestDecoder"

const leaf = { op: "eq", path: ["title"], value: "x" }
const deepNot = () => {
  let where: unknown = leaf
  for (let i = 0; i < 3_000; i++) where = { op: "not", filter: where }
  return where
}
const wideOr = () => ({ op: "or", filters: Array.from({ length: 20_000 }, (_, i) => ({ ...leaf, value: `t${i}` })) })
const longIn = () => ({ op: "in", path: ["title"], value: Array.from({ length: 60_000 }, (_, i) => `t${i}`) })

const scopeWith = (where: unknown) => ({ entities: [{ from: { kind: "entity", name: "Project" } }, { from: { kind: "entity", name: "Task" }, where }] })
const decoders = {
  snapshot: (where: unknown) => decodeSnapshotRequest({ scope: scopeWith(where) }),
  changes: (where: unknown) => decodeChangesRequest({ scope: scopeWith(where), cursor: "c", live: false })
}

describe("sync request decoders", () => {
  it.effect("3,000 nested not, a 20,000-term or and a 60,000-value in are query_budget_exceeded, as for a query", () =>
    Effect.gen(function* () {
      for (const [name, decode] of Object.entries(decoders)) {
        for (const [make, limit] of [[deepNot, "maxFilterNodes"], [wideOr, "maxFilterNodes"], [longIn, "maxInValues"]] as const) {
          const error = yield* Effect.flip(decode(make()))
          assert.strictEqual(error.code, "query_budget_exceeded", `${name} ${make.name}`)
          assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, limit, `${name} ${make.name}`)
          assert.include(error.message, "/scope/entities/1/where")
          const query = yield* Effect.flip(
            decodeQueryRequest({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, where: make() } })
          )
          assert.strictEqual(query._tag === "QueryBudgetExceeded" && query.limit, limit)
        }
      }
    }).pipe(Effect.provide(QueryLimits.layer())))

  it.effect("a valid filter decodes identically for query and sync", () =>
    Effect.gen(function* () {
      const where = {
        op: "and",
        filters: [
          { op: "in", path: ["status"], value: ["open", "done"] },
          { op: "not", filter: { op: "isNull", path: ["dueDate"] } },
          { op: "or", filters: [{ op: "startsWith", path: ["title"], value: "a" }, { op: "gte", path: ["priority"], value: 2 }] }
        ]
      }
      const query = yield* decodeQueryRequest({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, where } })
      const snapshot = yield* decoders.snapshot(where)
      const changes = yield* decoders.changes(where)
      assert.deepStrictEqual<unknown>(query.query.where, where)
      assert.deepStrictEqual(snapshot.scope.entities[1]!.where, query.query.where)
      assert.deepStrictEqual(changes.scope.entities[1]!.where, query.query.where)
      assert.deepStrictEqual<unknown>(changes, { scope: scopeWith(where), cursor: "c", live: false })
    }).pipe(Effect.provide(QueryLimits.layer())))

  it.effect("malformed filters and requests are invalid_query with the same issues as a query's", () =>
    Effect.gen(function* () {
      const bad = { op: "and", filters: [{ op: "eq", path: ["title"], value: "x", bogus: 1 }] }
      const sync = yield* Effect.flip(decoders.snapshot(bad))
      const query = yield* Effect.flip(
        decodeQueryRequest({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: { path: ["id"] } }, where: bad } })
      )
      assert.strictEqual(sync.code, "invalid_query")
      assert.deepStrictEqual(sync._tag === "InvalidQuery" && sync.issues?.map((i) => i.path), ["/scope/entities/1/where/filters/0/bogus"])
      assert.deepStrictEqual(query._tag === "InvalidQuery" && query.issues?.map((i) => i.path), ["/query/where/filters/0/bogus"])
      const unknownOp = yield* Effect.flip(decoders.changes({ op: "between", path: ["priority"], value: 1 }))
      assert.deepStrictEqual(unknownOp._tag === "InvalidQuery" && unknownOp.issues?.map((i) => i.path), ["/scope/entities/1/where/op"])
      const extra = yield* Effect.flip(decodeSnapshotRequest({ scope: scopeWith(leaf), limit: 5 }))
      assert.deepStrictEqual(extra._tag === "InvalidQuery" && extra.issues?.map((i) => i.path), ["/limit"])
      const noCursor = yield* Effect.flip(decodeChangesRequest({ scope: scopeWith(leaf) }))
      assert.deepStrictEqual(noCursor._tag === "InvalidQuery" && noCursor.issues?.map((i) => i.path), ["/cursor"])
      // More entries than a scope holds fail before any filter is looked at (one shared hostile list).
      const entry = { from: { kind: "entity", name: "Task" }, where: longIn() }
      const many = yield* Effect.flip(decodeSnapshotRequest({ scope: { entities: Array.from({ length: 100_000 }, () => entry) } }))
      assert.deepStrictEqual(many._tag === "InvalidQuery" && many.issues?.map((i) => i.path), ["/scope/entities"])
      for (const raw of [null, "x", 1, [], { scope: null }, { scope: { entities: {} } }]) {
        assert.strictEqual((yield* Effect.flip(decodeSnapshotRequest(raw))).code, "invalid_query", JSON.stringify(raw))
      }
    }).pipe(Effect.provide(QueryLimits.layer())))
})

// Every public error of `query`: malformed documents (decoded strictly), type and
// operator mismatches, hidden versus nonexistent definitions (byte-for-byte the same
// answer), a stale ifCatalog, every budget, and cursors that are tampered with or
// replayed under another query, principal, database or catalog.
import { assert, describe, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Entity, Migration, RootSchema, RowScope } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { describe as describeCatalog, DescribeLimits } from "@cairn/catalog/Describe"
import { View } from "@cairn/catalog/View"
import { type Principal } from "@cairn/domain/Principal"
import { type PublicError, toPublicBody } from "@cairn/domain/PublicError"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { decodeQueryRequest } from "@cairn/query/QueryRequestDecoder"
import { defaultQueryLimits, QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { Label, Member, Task, tracker } from "@cairn/testkit/fixture/tracker"
import { catalog, clear, fullView, insert, TestLive, who } from "./support.js"

const at = "2026-01-01T00:00:00.000Z"
const stamp = { createdAt: at, updatedAt: at }

const seed = Effect.gen(function* () {
  yield* clear
  yield* insert("Project", [{ id: "P1", name: "one", archived: false, ...stamp }])
  yield* insert("Member", [{ id: "M1", projectId: "P1", subject: "alice", role: "owner", email: "a@example.com", ...stamp }])
  yield* insert(
    "Task",
    Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, projectId: "P1", title: `task ${i}`, status: "open", ...stamp }))
  )
})

const doc = (query: Partial<QueryDocumentV1> & Pick<QueryDocumentV1, "select">, from = "Task"): QueryDocumentV1 => ({
  version: 1,
  from: { kind: "entity", name: from },
  ...query
})

interface Options {
  readonly view?: View
  readonly principal?: Principal
  readonly database?: string
  readonly ifCatalog?: string
}

const run = (query: QueryDocumentV1, options: Options = {}) =>
  Effect.gen(function* () {
    const planner = yield* QueryPlanner
    const sql = yield* SqlClient.SqlClient
    return yield* planner.run({
      view: options.view ?? fullView,
      principal: options.principal ?? who("alice"),
      database: { id: options.database ?? "db-1", sql },
      request: { query, ...(options.ifCatalog === undefined ? {} : { ifCatalog: options.ifCatalog }) }
    })
  })

const failure = (query: QueryDocumentV1, options: Options = {}) => Effect.flip(run(query, options))

const body = (error: PublicError) => JSON.stringify(toPublicBody(error))

const ids = { id: { path: ["id"] } }

layer(TestLive)("query errors", (it) => {
  describe("malformed documents", () => {
    const base = { version: 1, from: { kind: "entity", name: "Task" }, select: ids }
    const decodeFailure = (query: unknown) => Effect.flip(decodeQueryRequest({ query }))

    it.effect("version, unknown keys and shapes point at the offending place", () =>
      Effect.gen(function* () {
        const version = yield* decodeFailure({ ...base, version: 2 })
        assert.strictEqual(version.code, "invalid_query")
        assert.deepStrictEqual(version._tag === "InvalidQuery" && version.issues?.map((i) => i.path), ["/query/version"])
        const extra = yield* decodeFailure({ ...base, limit: 5 })
        assert.deepStrictEqual(extra._tag === "InvalidQuery" && extra.issues?.map((i) => i.path), ["/query/limit"])
        assert.include(extra.message, "/query/limit")
        const direction = yield* decodeFailure({ ...base, order: [{ path: ["title"], direction: "up" }] })
        assert.deepStrictEqual(direction._tag === "InvalidQuery" && direction.issues?.map((i) => i.path), ["/query/order/0/direction"])
        const select = yield* decodeFailure({ ...base, select: { x: { path: "title" } } })
        assert.deepStrictEqual(select._tag === "InvalidQuery" && select.issues?.map((i) => i.path), ["/query/select/x/path"])
      }))

    it.effect("malformed filters point at the node and key that is wrong", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [unknown, string]> = [
          [{ op: "between", path: ["priority"], value: 1 }, "/query/where/op"],
          [{ op: "and", filters: [{ op: "eq", path: ["title"], value: "x", bogus: 1 }] }, "/query/where/filters/0/bogus"],
          [{ op: "or", filters: [{ op: "eq", path: ["title"], value: "x" }, { op: "in", path: ["title"], value: "x" }] }, "/query/where/filters/1/value"],
          [{ op: "not", filter: { op: "eq", path: [], value: 1 } }, "/query/where/filter/path"],
          [{ op: "isNull", path: ["dueDate"], value: null }, "/query/where/value"],
          [{ op: "eq", path: ["title"], value: { nested: true } }, "/query/where/value"],
          ["title = 'x'", "/query/where"]
        ]
        for (const [where, path] of cases) {
          const error = yield* decodeFailure({ ...base, where })
          assert.strictEqual(error.code, "invalid_query", JSON.stringify(where))
          assert.deepStrictEqual(error._tag === "InvalidQuery" && error.issues?.map((i) => i.path), [path], JSON.stringify(where))
          assert.include(error.message, path)
        }
        const good = yield* decodeQueryRequest({ query: { ...base, where: { op: "and", filters: [{ op: "eq", path: ["title"], value: "x" }] } } })
        assert.deepStrictEqual(good.query.where, { op: "and", filters: [{ op: "eq", path: ["title"], value: "x" }] })
      }))

    it.effect("a filter too large to look at is a budget failure, before it is decoded", () =>
      Effect.gen(function* () {
        let where: unknown = { op: "isNull", path: ["dueDate"] }
        for (let i = 0; i < 10_000; i++) where = { op: "not", filter: where }
        const error = yield* decodeFailure({ ...base, where })
        assert.strictEqual(error.code, "query_budget_exceeded")
        assert.strictEqual(error._tag === "QueryBudgetExceeded" && error.limit, "maxFilterNodes")
      }))
  })

  describe("values, operators and paths", () => {
    it.effect("values are checked against the field's type", () =>
      Effect.gen(function* () {
        const cases: ReadonlyArray<readonly [QueryDocumentV1["where"], string]> = [
          [{ op: "eq", path: ["priority"], value: "high" }, "/query/where/value"],
          [{ op: "eq", path: ["priority"], value: 1.5 }, "/query/where/value"],
          [{ op: "eq", path: ["status"], value: "closed" }, "/query/where/value"],
          [{ op: "eq", path: ["project", "archived"], value: "yes" }, "/query/where/value"],
          [{ op: "in", path: ["title"], value: ["a", 3] }, "/query/where/value/1"],
          [{ op: "eq", path: ["dueDate"], value: null }, "/query/where/value"],
          [{ op: "and", filters: [{ op: "startsWith", path: ["title"], value: 1 }] }, "/query/where/filters/0/value"]
        ]
        for (const [where, path] of cases) {
          const error = yield* failure(doc({ select: ids, ...(where ? { where } : {}) }))
          assert.strictEqual(error.code, "invalid_query", JSON.stringify(where))
          assert.deepStrictEqual(error._tag === "InvalidQuery" && error.issues?.map((i) => i.path), [path])
          assert.include(error.message, path)
        }
      }))

    it.effect("operators must be ones the field offers", () =>
      Effect.gen(function* () {
        const lt = yield* failure(doc({ select: ids, where: { op: "lt", path: ["status"], value: "open" } }))
        assert.strictEqual(lt.code, "invalid_query")
        assert.include(lt.message, "eq, ne, in, notIn")
        const isNull = yield* failure(doc({ select: ids, where: { op: "isNull", path: ["title"] } }))
        assert.strictEqual(isNull.code, "invalid_query")
        assert.include(isNull.message, "/query/where/op")
      }))

    it.effect("paths that end at a relationship or walk through a field are invalid; no select is invalid", () =>
      Effect.gen(function* () {
        const relationship = yield* failure(doc({ select: { p: { path: ["project"] } } }))
        assert.strictEqual(relationship.code, "invalid_query")
        assert.include(relationship.message, `["project","id"]`)
        const through = yield* failure(doc({ select: { p: { path: ["title", "length"] } } }))
        assert.strictEqual(through.code, "invalid_query")
        assert.include(through.message, "/query/select/p/path")
        const empty = yield* failure(doc({ select: {} }))
        assert.strictEqual(empty.code, "invalid_query")
      }))
  })

  describe("hidden answers exactly as nonexistent", () => {
    // The same catalog without what the restricted view hides: Member.email, Task's
    // relationship to Project (Project is hidden), and the Label entity.
    const bare = Effect.gen(function* () {
      const { email: _, ...memberFields } = Member.fields
      // Project is hidden in the restricted view, so here it does not exist, nor any relationship to it.
      const withoutProject = (e: (typeof tracker.entities)[number]) =>
        Object.fromEntries(Object.entries(e.relationships).filter(([, r]) => r.target !== "Project"))
      const entities = tracker.entities
        .filter((e) => e !== Label && e.name !== "Project")
        .map((e) =>
          e === Member
            ? Entity.make("Member", { ...Member, fields: memberFields, relationships: withoutProject(e) })
            : Entity.make(e.name, { ...e, relationships: withoutProject(e) })
        )
      return View.full(yield* compile(RootSchema.make("tracker", { traits: tracker.traits, entities })))
    })
    const restricted = new View(catalog, {
      entity: (e) => e !== "Project" && e !== "Label",
      field: (e, f) => !(e === "Member" && f === "email"),
      operation: () => true,
      rowScope: () => RowScope.all
    })

    it.effect("a hidden field, relationship or entity fails byte-for-byte like a nonexistent one", () =>
      Effect.gen(function* () {
        yield* seed
        const nonexistent = yield* bare
        const queries: ReadonlyArray<QueryDocumentV1> = [
          doc({ select: { e: { path: ["email"] } } }, "Member"),
          doc({ select: ids, where: { op: "isNull", path: ["email"] } }, "Member"),
          doc({ select: ids, order: [{ path: ["email"], direction: "asc" }] }, "Member"),
          doc({ select: { p: { path: ["project", "name"] } } }),
          doc({ select: ids, where: { op: "eq", path: ["project", "archived"], value: false } }),
          doc({ select: ids }, "Label")
        ]
        for (const query of queries) {
          const hidden = yield* failure(query, { view: restricted })
          const missing = yield* failure(query, { view: nonexistent })
          assert.strictEqual(hidden.code, "inaccessible")
          assert.strictEqual(body(hidden), body(missing), JSON.stringify(query))
        }
        // The message names what the caller can use instead, and nothing hidden.
        const typo = yield* failure(doc({ select: { e: { path: ["emial"] } } }, "Member"), { view: restricted })
        assert.include(typo.message, "Fields you can use on Member: id, projectId, subject, role")
        assert.notInclude(typo.message, "email")
        assert.notInclude(typo.message, "project;")
        // And the same field answers normally where it is visible.
        const visible = yield* run(doc({ select: { e: { path: ["email"] } } }, "Member"))
        assert.deepStrictEqual(visible.rows, [{ e: "a@example.com" }])
      }))
  })

  it.effect("ifCatalog is the engine's to check once, not the planner's (see TransportConformanceEndToEnd)", () =>
    Effect.gen(function* () {
      yield* seed
      const ok = yield* run(doc({ select: ids }), { ifCatalog: "stale-token" })
      assert.strictEqual(ok.rows.length, 6)
      assert.strictEqual(ok.basis.catalogToken, fullView.token)
    }))

  describe("budgets", () => {
    const limited = <A, E, R>(effect: Effect.Effect<A, E, R>, limits: Partial<typeof QueryLimits.Service>) =>
      Effect.provideService(effect, QueryLimits, { ...defaultQueryLimits, ...limits })
    const budgetOf = (error: PublicError) => (error._tag === "QueryBudgetExceeded" ? error.limit : error.code)

    it.effect("page size, projection, path depth, filter nodes, in values and order terms", () =>
      Effect.gen(function* () {
        yield* seed
        const big = yield* failure(doc({ select: ids, page: { first: 201 } }))
        assert.strictEqual(budgetOf(big), "maxPageSize")
        assert.include(big.message, "200")
        const wide = yield* limited(failure(doc({ select: { a: { path: ["id"] }, b: { path: ["title"] }, c: { path: ["status"] } } })), { maxProjection: 2 })
        assert.strictEqual(budgetOf(wide), "maxProjection")
        const deep = yield* limited(failure(doc({ select: { n: { path: ["task", "project", "name"] } } }, "Comment")), { maxPathDepth: 1 })
        assert.strictEqual(budgetOf(deep), "maxPathDepth")
        const okDeep = yield* run(doc({ select: { n: { path: ["task", "project", "name"] } } }, "Comment"))
        assert.deepStrictEqual(okDeep.rows, [])
        const nodes = yield* limited(
          failure(doc({ select: ids, where: { op: "and", filters: [{ op: "isNull", path: ["dueDate"] }, { op: "isNull", path: ["priority"] }] } })),
          { maxFilterNodes: 2 }
        )
        assert.strictEqual(budgetOf(nodes), "maxFilterNodes")
        const values = yield* failure(doc({ select: ids, where: { op: "in", path: ["title"], value: Array.from({ length: 101 }, (_, i) => `t${i}`) } }))
        assert.strictEqual(budgetOf(values), "maxInValues")
        const order = yield* failure(
          doc({ select: ids, order: ["title", "status", "priority", "dueDate", "createdAt"].map((f) => ({ path: [f], direction: "asc" as const })) })
        )
        assert.strictEqual(budgetOf(order), "maxOrderTerms")
        // At the limits themselves, the same shapes run.
        const atLimit = yield* run(doc({ select: ids, page: { first: 200 }, where: { op: "in", path: ["title"], value: Array.from({ length: 100 }, (_, i) => `task ${i}`) } }))
        assert.strictEqual(atLimit.rows.length, 6)
      }))
  })

  describe("cursors", () => {
    const paged = doc({ select: ids, page: { first: 2 } })
    const firstCursor = (options: Options = {}) => Effect.map(run(paged, options), (r) => r.cursor!)
    const continueWith = (after: string, query: QueryDocumentV1 = paged, options: Options = {}) =>
      failure({ ...query, page: { ...query.page, after } }, options)

    it.effect("a cursor continues the same query, even with another page size", () =>
      Effect.gen(function* () {
        yield* seed
        const after = yield* firstCursor()
        const next = yield* run({ ...paged, page: { first: 3, after } })
        assert.deepStrictEqual(next.rows, [{ id: "t2" }, { id: "t3" }, { id: "t4" }])
      }))

    it.effect("a tampered or foreign cursor is invalid_query", () =>
      Effect.gen(function* () {
        yield* seed
        const after = yield* firstCursor()
        const flipped = after.slice(0, 10) + (after[10] === "A" ? "B" : "A") + after.slice(11)
        for (const bad of [flipped, after.slice(0, -2), "not-a-cursor", "", after + after]) {
          const error = yield* continueWith(bad)
          assert.strictEqual(error.code, "invalid_query", bad)
          assert.include(error.message, "/query/page/after")
        }
        // A describe cursor, sealed with the same key for another purpose, does not open.
        const view = View.full(catalog)
        const described = yield* describeCatalog(view, { browse: { kinds: ["entity"] }, page: { limit: 1 } }).pipe(
          Effect.provide(DescribeLimits.layer())
        )
        assert.strictEqual((yield* continueWith(described.cursor!)).code, "invalid_query")
      }))

    it.effect("a cursor replayed with another query, principal or database is invalid_query", () =>
      Effect.gen(function* () {
        yield* seed
        const after = yield* firstCursor()
        const otherQueries: ReadonlyArray<QueryDocumentV1> = [
          { ...paged, where: { op: "eq", path: ["status"], value: "open" } },
          { ...paged, order: [{ path: ["id"], direction: "desc" }] },
          { ...paged, select: { id: { path: ["id"] }, title: { path: ["title"] } } }
        ]
        for (const query of otherQueries) assert.strictEqual((yield* continueWith(after, query)).code, "invalid_query")
        assert.strictEqual((yield* continueWith(after, paged, { principal: who("bob") })).code, "invalid_query")
        assert.strictEqual((yield* continueWith(after, paged, { principal: who("alice", "other-org") })).code, "invalid_query")
        assert.strictEqual((yield* continueWith(after, paged, { database: "db-2" })).code, "invalid_query")
      }))

    it.effect("a cursor continues across a catalog change that leaves the query's definitions as they were", () =>
      Effect.gen(function* () {
        yield* seed
        const after = yield* firstCursor()
        // Another definition (Project) has a new version; the query reads only Task.
        const changed = View.full(catalog.withMigrations([Migration.make({ name: "retype-project", description: "Project changed.", covers: ["Project"] })]))
        assert.notStrictEqual(changed.token, View.full(catalog).token)
        const next = yield* run({ ...paged, page: { first: 3, after } }, { view: changed })
        assert.deepStrictEqual(next.rows, [{ id: "t2" }, { id: "t3" }, { id: "t4" }])
      }))

    it.effect("a cursor from another catalog is catalog_changed with the current token", () =>
      Effect.gen(function* () {
        yield* seed
        const after = yield* firstCursor()
        const changed = View.full(catalog.withMigrations([Migration.make({ name: "retype-task", description: "Task changed.", covers: ["Task"] })]))
        const error = yield* continueWith(after, paged, { view: changed })
        assert.strictEqual(error.code, "catalog_changed")
        assert.strictEqual(error._tag === "CatalogChanged" && error.catalogToken, changed.token)
      }))
  })
})

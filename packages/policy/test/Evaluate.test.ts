// The in-memory evaluator: hand-checked cases of its SQL semantics, then a property test
// against SQLite itself running the SQL a scope filter naturally compiles to, over
// random rows and random filters (relationship paths, exists, NULLs, empty lists,
// UTF-8 ordering). Finally mutation rules checked over one invocation.
import Database from "better-sqlite3"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { RowScope } from "@cairn/catalog"
import { compile as compileCatalog } from "@cairn/catalog/Catalog"
import type { Scalar } from "@cairn/domain/QueryDocument"
import { evaluate, inScope, inScopeEffect, type Lookup, permits, permitsEffect, type RecordValue } from "@cairn/policy/Evaluate"
import { shop } from "./fixture.js"
import { dataArb, type Data, docFilter } from "./support/arbitraries.js"

type ScopeFilter = RowScope.ScopeFilter

const catalog = Effect.runSync(compileCatalog(shop))


const lookupIn =
  (data: Data): Lookup =>
  (entity, field, value) =>
    data[entity as keyof Data].filter((r) => r[field] === value)

const fixed: Data = {
  Team: [
    { id: "t1", name: "red", tier: "pro", active: true, seats: 3, score: 1.5, note: "n" },
    { id: "t2", name: "blue", tier: "free", active: false, seats: 10, score: -2 }
  ],
  Doc: [
    { id: "d1", teamId: "t1", title: "alpha", rank: 2, archived: false, ownerSub: "alice" },
    { id: "d2", teamId: "t2", title: "beta", archived: true, ownerSub: "bob" },
    { id: "d3", teamId: "gone", title: "gamma", rank: 1, archived: false, ownerSub: "bob" }
  ],
  Grant: [{ id: "g1", docId: "d2", subject: "alice", level: "write" }]
}

const docsWhere = (filter: ScopeFilter, data: Data = fixed) =>
  data.Doc.filter((d) => evaluate(catalog, "Doc", filter, d, lookupIn(data))).map((d) => d.id)

describe("evaluate", () => {
  it("follows SQL's three-valued logic over NULLs", () => {
    const rankIs2: ScopeFilter = { op: "eq", path: ["rank"], value: 2 }
    assert.deepStrictEqual(docsWhere(rankIs2), ["d1"])
    // d2 has no rank: neither rank = 2 nor NOT (rank = 2) holds for it.
    assert.deepStrictEqual(docsWhere({ op: "not", filter: rankIs2 }), ["d3"])
    assert.deepStrictEqual(docsWhere({ op: "ne", path: ["rank"], value: 2 }), ["d3"])
    assert.deepStrictEqual(docsWhere({ op: "or", filters: [rankIs2, { op: "isNull", path: ["rank"] }] }), ["d1", "d2"])
    assert.deepStrictEqual(docsWhere({ op: "in", path: ["rank"], value: [] }), [])
    assert.deepStrictEqual(docsWhere({ op: "notIn", path: ["rank"], value: [] }), ["d1", "d2", "d3"])
    assert.deepStrictEqual(docsWhere({ op: "notIn", path: ["rank"], value: [1] }), ["d1"])
  })

  it("reads through relationships; a dangling one reads as NULL", () => {
    assert.deepStrictEqual(docsWhere({ op: "eq", path: ["team", "name"], value: "red" }), ["d1"])
    assert.deepStrictEqual(docsWhere({ op: "isNull", path: ["team", "name"] }), ["d3"])
    assert.deepStrictEqual(docsWhere({ op: "eq", path: ["team", "active"], value: false }), ["d2"])
    assert.deepStrictEqual(docsWhere({ op: "gt", path: ["team", "score"], value: 0 }), ["d1"])
  })

  it("exists matches related rows that satisfy where", () => {
    const granted: ScopeFilter = { op: "exists", entity: "Grant", field: "docId", path: ["id"], where: { op: "eq", path: ["subject"], value: "alice" } }
    assert.deepStrictEqual(docsWhere(granted), ["d2"])
    assert.deepStrictEqual(docsWhere({ op: "not", filter: granted }), ["d1", "d3"])
    assert.deepStrictEqual(docsWhere({ op: "exists", entity: "Team", field: "id", path: ["teamId"] }), ["d1", "d2"])
    const grantsOfRedDocs: ScopeFilter = { op: "exists", entity: "Doc", field: "id", path: ["docId"], where: { op: "eq", path: ["team", "name"], value: "blue" } }
    assert.isTrue(evaluate(catalog, "Grant", grantsOfRedDocs, fixed.Grant[0]!, lookupIn(fixed)))
  })

  it("inScope honours All and None", () => {
    const d1 = fixed.Doc[0]!
    assert.isTrue(inScope(catalog, "Doc", RowScope.all, d1, lookupIn(fixed)))
    assert.isFalse(inScope(catalog, "Doc", RowScope.none, d1, lookupIn(fixed)))
    assert.isTrue(inScope(catalog, "Doc", RowScope.where({ op: "eq", path: ["title"], value: "alpha" }), d1, lookupIn(fixed)))
  })

  it.effect("the effectful variant asks the same lookups and agrees", () =>
    Effect.gen(function* () {
      const asked: Array<string> = []
      const scope = RowScope.where({ op: "eq", path: ["team", "name"], value: "red" })
      for (const d of fixed.Doc) {
        const viaEffect = yield* inScopeEffect(catalog, "Doc", scope, d, (entity, field, value) =>
          Effect.sync(() => {
            asked.push(`${entity}.${field}=${value}`)
            return lookupIn(fixed)(entity, field, value)
          })
        )
        assert.strictEqual(viaEffect, inScope(catalog, "Doc", scope, d, lookupIn(fixed)))
      }
      assert.deepStrictEqual(asked, ["Team.id=t1", "Team.id=t2", "Team.id=gone"])
    }))
})

// ---- SQLite as the oracle ------------------------------------------------------------

const columns: Record<keyof Data, ReadonlyArray<string>> = {
  Team: ["name", "tier", "active", "seats", "score", "note"],
  Doc: ["teamId", "title", "rank", "archived", "ownerSub"],
  Grant: ["docId", "subject", "level"]
}

const bind = (v: unknown): string | number | null => (v === undefined || v === null ? null : typeof v === "boolean" ? (v ? 1 : 0) : (v as string | number))

/** The SQL a scope filter naturally compiles to (a reference, not the planner). */
let aliases = 0
const toSql = (entity: string, alias: string, filter: ScopeFilter, params: Array<unknown>): string => {
  const column = (path: ReadonlyArray<string>, from = entity, at = alias): string => {
    if (path.length === 1) return `${at}."${path[0]}"`
    // A to-one hop is a scalar subquery: NULL when the related row is missing.
    const rel = catalog.entity(from)!.relationship(path[0]!)!
    const a = `h${aliases++}`
    return `(SELECT ${column(path.slice(1), rel.target, a)} FROM "${rel.target}" ${a} WHERE ${a}."id" = ${at}."${rel.via}")`
  }
  switch (filter.op) {
    case "and":
    case "or":
      return filter.filters.length === 0
        ? filter.op === "and" ? "1" : "0"
        : `(${filter.filters.map((f) => toSql(entity, alias, f, params)).join(filter.op === "and" ? " AND " : " OR ")})`
    case "not":
      return `(NOT ${toSql(entity, alias, filter.filter, params)})`
    case "isNull":
      return `(${column(filter.path)} IS NULL)`
    case "exists": {
      const a = `e${aliases++}`
      const outer = column(filter.path)
      const where = filter.where ? ` AND ${toSql(filter.entity, a, filter.where, params)}` : ""
      return `EXISTS (SELECT 1 FROM "${filter.entity}" ${a} WHERE ${a}."${filter.field}" = ${outer}${where})`
    }
    case "in":
    case "notIn":
      params.push(...filter.value.map(bind))
      return `(${column(filter.path)} ${filter.op === "in" ? "IN" : "NOT IN"} (${filter.value.map(() => "?").join(", ")}))`
    case "startsWith":
      params.push(bind(filter.value))
      return `(instr(${column(filter.path)}, ?) = 1)`
    case "contains":
      params.push(bind(filter.value))
      return `(instr(${column(filter.path)}, ?) > 0)`
    default: {
      const op = { eq: "=", ne: "<>", lt: "<", lte: "<=", gt: ">", gte: ">=" }[filter.op]
      params.push(bind(filter.value))
      return `(${column(filter.path)} ${op} ?)`
    }
  }
}

describe("evaluate against SQLite", () => {
  it("selects exactly the rows SQLite selects", () => {
    const db = new Database(":memory:")
    try {
      db.exec(`
        CREATE TABLE "Team" (id TEXT PRIMARY KEY, name TEXT NOT NULL, tier TEXT NOT NULL, active INTEGER NOT NULL, seats INTEGER NOT NULL, score REAL NOT NULL, note TEXT) STRICT;
        CREATE TABLE "Doc" (id TEXT PRIMARY KEY, teamId TEXT NOT NULL, title TEXT NOT NULL, rank INTEGER, archived INTEGER NOT NULL, ownerSub TEXT NOT NULL) STRICT;
        CREATE TABLE "Grant" (id TEXT PRIMARY KEY, docId TEXT NOT NULL, subject TEXT NOT NULL, level TEXT NOT NULL) STRICT;`)
      let nonEmpty = 0
      fc.assert(
        fc.property(dataArb, docFilter, (data, filter) => {
          for (const table of ["Team", "Doc", "Grant"] as const) {
            db.exec(`DELETE FROM "${table}"`)
            const insert = db.prepare(`INSERT INTO "${table}" (id, ${columns[table].join(", ")}) VALUES (${["id", ...columns[table]].map(() => "?").join(", ")})`)
            for (const row of data[table]) insert.run(["id", ...columns[table]].map((c) => bind(row[c])))
          }
          const params: Array<unknown> = []
          const sql = `SELECT id FROM "Doc" d WHERE ${toSql("Doc", "d", filter, params)} ORDER BY id`
          const expected = (db.prepare(sql).all(...params) as Array<{ id: string }>).map((r) => r.id)
          const actual = docsWhere(filter, data).sort()
          if (expected.length > 0) nonEmpty++
          assert.deepStrictEqual(actual, expected, sql)
        }),
        { numRuns: 400, seed: 5 }
      )
      // The generators must produce filters that select something, or the comparison proves little.
      assert.isAbove(nonEmpty, 100)
    } finally {
      db.close()
    }
  })
})

describe("permits", () => {
  const lookup = lookupIn(fixed)
  const redOnly = RowScope.where({ op: "eq", path: ["name"], value: "red" })
  const allowCreate = { _tag: "Allow" as const, references: [{ inputField: "teamId", entity: "Team", scope: redOnly }] }

  it("checks references in the input against their scopes", () => {
    assert.isTrue(permits(catalog, "Doc", allowCreate, { input: { teamId: "t1", title: "x" } }, lookup))
    assert.isFalse(permits(catalog, "Doc", allowCreate, { input: { teamId: "t2", title: "x" } }, lookup))
    // A missing row is refused exactly like one out of scope.
    assert.isFalse(permits(catalog, "Doc", allowCreate, { input: { teamId: "nope", title: "x" } }, lookup))
    assert.isFalse(permits(catalog, "Doc", allowCreate, { input: { teamId: 7, title: "x" } }, lookup))
    // An absent optional reference is not checked.
    assert.isTrue(permits(catalog, "Doc", allowCreate, { input: { title: "x" } }, lookup))
    assert.isFalse(permits(catalog, "Doc", { _tag: "Deny" }, { input: { teamId: "t1" } }, lookup))
  })

  it.effect("checks the target against its scope, also through an effectful lookup", () =>
    Effect.gen(function* () {
      const rule = { _tag: "Allow" as const, target: RowScope.where({ op: "eq", path: ["team", "name"], value: "red" }), references: [] }
      assert.isTrue(permits(catalog, "Doc", rule, { target: fixed.Doc[0]!, input: {} }, lookup))
      assert.isFalse(permits(catalog, "Doc", rule, { target: fixed.Doc[1]!, input: {} }, lookup))
      assert.isFalse(permits(catalog, "Doc", rule, { input: {} }, lookup))
      const viaEffect = yield* permitsEffect(catalog, "Doc", rule, { target: fixed.Doc[0]!, input: {} }, (e, f, v) => Effect.succeed(lookup(e, f, v)))
      assert.isTrue(viaEffect)
      const refused = yield* permitsEffect(catalog, "Doc", allowCreate, { input: { teamId: "t2" } }, (e, f, v) => Effect.succeed(lookup(e, f, v)))
      assert.isFalse(refused)
    }))
})

// Row scopes as templates over the subject, and their evaluation for every subject at once:
// hand-checked cases, then a property test against `inScope` of each subject's own scope
// over random rows and random filters (the generators of the SQLite property test).
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { RowScope } from "@cairn/catalog"
import { compile as compileCatalog } from "@cairn/catalog/Catalog"
import { forSubject, inScope, inScopeBySubject, type Lookup, type RecordValue } from "@cairn/policy/Evaluate"
import { instantiate, parameter, template } from "@cairn/policy/SubjectTemplate"
import { dataArb, docFilter, type Data } from "./support/arbitraries.js"
import { shop } from "./fixture.js"

const catalog = Effect.runSync(compileCatalog(shop))

type ScopeFilter = RowScope.ScopeFilter
/** Filters that compare with subjects, by equality (a template decides these for every subject) or by ordering (it does not). */
const named = fc.constantFrom("alice", "bob", "carol")
const subjectLeaf = (path: ReadonlyArray<string>): fc.Arbitrary<ScopeFilter> =>
  fc.oneof(
    fc.record({ op: fc.constantFrom("eq" as const, "ne" as const, "eq" as const, "lt" as const), path: fc.constant(path), value: named }),
    fc.record({ op: fc.constantFrom("in" as const, "notIn" as const), path: fc.constant(path), value: fc.array(fc.oneof(named, fc.constant(null)), { maxLength: 3 }) })
  )
const granted: fc.Arbitrary<ScopeFilter> = fc
  .oneof(subjectLeaf(["subject"]), fc.record({ op: fc.constantFrom("and" as const, "or" as const), filters: fc.array(subjectLeaf(["subject"]), { minLength: 1, maxLength: 2 }) }), fc.record({ op: fc.constant("not" as const), filter: subjectLeaf(["subject"]) }))
  .map((where): ScopeFilter => ({ op: "exists", entity: "Grant", field: "docId", path: ["id"], where }))
const bySubjects: fc.Arbitrary<ScopeFilter> = fc.oneof(
  docFilter,
  granted,
  subjectLeaf(["ownerSub"]),
  fc.record({ op: fc.constant("not" as const), filter: granted }),
  fc.record({ op: fc.constantFrom("and" as const, "or" as const), filters: fc.tuple(fc.oneof(docFilter, subjectLeaf(["ownerSub"])), granted) })
)
const lookupIn =
  (data: Data): Lookup =>
  (entity, field, value) =>
    data[entity as keyof Data].filter((r) => r[field] === value)

const grantedTo = (subject: string) =>
  RowScope.where({ op: "exists", entity: "Grant", field: "docId", path: ["id"], where: { op: "eq", path: ["subject"], value: subject } })

const data: Data = {
  Team: [],
  Doc: [
    { id: "d1", teamId: "t1", title: "alice", archived: false, ownerSub: "alice" },
    { id: "d2", teamId: "t1", title: "b", archived: false, ownerSub: "bob" }
  ],
  Grant: [
    { id: "g1", docId: "d1", subject: "alice", level: "read" },
    { id: "g2", docId: "d1", subject: "bob", level: "write" },
    { id: "g3", docId: "d2", subject: "bob", level: "read" }
  ]
}

describe("SubjectTemplate", () => {
  it("replaces the subject's values by the parameter, and back", () => {
    const scope = RowScope.where({ op: "and", filters: [{ op: "in", path: ["ownerSub"], value: ["alice", "carol"] }, { op: "ne", path: ["title"], value: "bob" }] })
    const t = template(scope, "alice")!
    assert.deepStrictEqual(t, RowScope.where({ op: "and", filters: [{ op: "in", path: ["ownerSub"], value: [parameter, "carol"] }, { op: "ne", path: ["title"], value: "bob" }] }))
    assert.deepStrictEqual(instantiate(t, "alice"), scope)
    // Two subjects granted alike share a template; the parameter's own text never stands for a subject.
    assert.deepStrictEqual(template(grantedTo("alice"), "alice"), template(grantedTo("bob"), "bob"))
    assert.isUndefined(template(grantedTo(parameter), "alice"))
    assert.isUndefined(template(grantedTo("alice"), parameter))
    assert.deepStrictEqual(template(RowScope.all, "alice"), RowScope.all)
  })

  it("decides a record for every subject at once", () => {
    const t = template(grantedTo("alice"), "alice")!
    const d1 = inScopeBySubject(catalog, "Doc", t, data.Doc[0]!, parameter, lookupIn(data))!
    assert.deepStrictEqual([forSubject(d1, "alice"), forSubject(d1, "bob"), forSubject(d1, "carol")], [true, true, false])
    const d2 = inScopeBySubject(catalog, "Doc", t, data.Doc[1]!, parameter, lookupIn(data))!
    assert.deepStrictEqual([forSubject(d2, "alice"), forSubject(d2, "bob"), forSubject(d2, "carol")], [false, true, false])
    // Not granted: true for everyone but the grantees.
    const notGranted = RowScope.where({ op: "not", filter: (t as { filter: RowScope.ScopeFilter }).filter })
    const n1 = inScopeBySubject(catalog, "Doc", notGranted, data.Doc[0]!, parameter, lookupIn(data))!
    assert.deepStrictEqual([forSubject(n1, "alice"), forSubject(n1, "bob"), forSubject(n1, "carol")], [false, false, true])
    // Granted to someone else: d1 (alice and bob) for everyone, d2 (bob only) for all but bob.
    const toOther = RowScope.where({ op: "exists", entity: "Grant", field: "docId", path: ["id"], where: { op: "ne", path: ["subject"], value: parameter } })
    const o1 = inScopeBySubject(catalog, "Doc", toOther, data.Doc[0]!, parameter, lookupIn(data))!
    assert.deepStrictEqual([forSubject(o1, "alice"), forSubject(o1, "bob"), forSubject(o1, "carol")], [true, true, true])
    const o2 = inScopeBySubject(catalog, "Doc", toOther, data.Doc[1]!, parameter, lookupIn(data))!
    assert.deepStrictEqual([forSubject(o2, "alice"), forSubject(o2, "bob"), forSubject(o2, "carol")], [true, false, true])
    // An ordering against the subject is no finite list of exceptions: no answer, the caller decides each subject itself.
    const ordered = RowScope.where({ op: "lt", path: ["title"], value: parameter })
    assert.isUndefined(inScopeBySubject(catalog, "Doc", ordered, data.Doc[0]!, parameter, lookupIn(data)))
  })

  it("agrees with each subject's own scope over random rows and filters", () => {
    const subjects = ["alice", "bob", "carol", "dave", "a", "ab", "10", "😀", "", "\uD800"]
    let decided = 0
    let apart = 0
    fc.assert(
      fc.property(dataArb, bySubjects, fc.oneof(named, fc.constantFrom(...subjects)), (data, filter, maker) => {
        const scope = RowScope.where(filter)
        const t = template(scope, maker)
        if (t === undefined) return
        assert.deepStrictEqual(instantiate(t, maker), scope)
        const lookup = lookupIn(data)
        for (const doc of data.Doc as ReadonlyArray<RecordValue>) {
          const all = inScopeBySubject(catalog, "Doc", t, doc, parameter, lookup)
          if (all === undefined) continue
          decided++
          if (all.only.size > 0) apart++
          for (const subject of subjects) {
            assert.strictEqual(forSubject(all, subject), inScope(catalog, "Doc", instantiate(t, subject), doc, lookup), `${subject}: ${JSON.stringify(filter)}`)
          }
        }
      }),
      { numRuns: 400, seed: 7 }
    )
    // The property must be exercised: records decided, many of them with subjects set apart.
    assert.isAbove(decided, 300)
    assert.isAbove(apart, 50)
  })
})

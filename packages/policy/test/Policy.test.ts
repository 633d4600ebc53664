// Policy compilation (every mistake reported precisely, all at once), per-principal
// views and mutation rules with principal references substituted, and the digest.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { RowScope } from "@cairn/catalog"
import { compile as compileCatalog } from "@cairn/catalog/Catalog"
import { operationRef } from "@cairn/domain/References"
import { Policy, Rule } from "@cairn/policy"
import { PolicyError } from "@cairn/policy/PolicyError"
import { Doc, DocCreate, DocRename, Grant, GrantAdd, principalOf, shop, Team } from "./fixture.js"

const { always, and, eq, exists, hasClaim, hasRole, hasScope, isIn, isNull, never, not, or, principal } = Rule

const shopPolicy = Policy.make({
  entities: [
    Policy.entity(Team, { read: or(hasRole("admin"), eq("name", principal.claim("team"))), fields: { note: hasRole("admin") } }),
    Policy.entity(Doc, {
      read: or(hasRole("admin"), eq("ownerSub", principal.subject), exists("Grant", "docId", "id", eq("subject", principal.subject)))
    }),
    Policy.entity(Grant, { read: eq("subject", principal.subject), visible: hasScope("grants") })
  ],
  operations: [
    Policy.operation(DocCreate),
    Policy.operation(DocRename, {
      target: or(eq("ownerSub", principal.subject), exists("Grant", "docId", "id", and(eq("subject", principal.subject), eq("level", "write"))))
    }),
    Policy.operation(GrantAdd, { visible: hasRole("admin"), references: { copyOf: { entity: "Grant" } } })
  ]
})

const catalog = compileCatalog(shop)
const compiled = Effect.flatMap(catalog, (c) => Policy.compile(c, shopPolicy))

const problemsOf = (definition: Policy.PolicyDefinition) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(Effect.flatMap(catalog, (c) => Policy.compile(c, definition)))
    assert.isTrue(Exit.isFailure(exit), "the policy should not compile")
    const error = yield* Effect.flip(Effect.flatMap(catalog, (c) => Policy.compile(c, definition)))
    assert.instanceOf(error, PolicyError)
    return error.problems
  })

describe("Policy.compile", () => {
  it.effect("reports every unknown name and mistyped value, each with its place", () =>
    Effect.gen(function* () {
      const problems = yield* problemsOf(
        Policy.make({
          entities: [
            Policy.entity("Tem", { read: always }),
            Policy.entity(Team, {
              read: and(
                eq("nme", "x"),
                eq("seats", "three"),
                eq("tier", "gold"),
                eq("active", 1),
                eq("seats", 2.5),
                eq("name", null),
                isNull("name"),
                Rule.startsWith("seats", "1"),
                eq("seats", principal.subject),
                isIn("tier", principal.roles),
                not(exists("Doc", "teamId", "id", eq("titel", "a")))
              ),
              visible: eq("active", true),
              // @ts-expect-error: the field does not exist, and the type says so
              fields: { notes: hasRole("admin") }
            }),
            Policy.entity(Doc, {
              read: or(eq("team.name", "a"), eq("team", "a"), eq("owner.name", "a"), exists("Grnt", "docId", "id"), exists("Grant", "level", "id"), exists("Grant", "docId", "rank"))
            }),
            // @ts-expect-error: the record id is not a field that can be hidden
            Policy.entity(Grant, { read: always, fields: { id: never } })
          ],
          operations: [
            Policy.operation("Doc.delete"),
            Policy.operation(DocCreate, { target: always }),
            // @ts-expect-error: not an input field
            Policy.operation(DocRename, { references: { teamId: always } }),
            Policy.operation(GrantAdd, { references: { subject: always } })
          ]
        })
      )
      assert.deepStrictEqual(problems, [
        `entity "Tem": not defined in catalog "shop"`,
        `entity "Team", read rule at and[0]: path "nme": Team has no field "nme"`,
        `entity "Team", read rule at and[1]: "three" is not a valid integer value for Team.seats`,
        `entity "Team", read rule at and[2]: "gold" is not one of the values of Team.tier ("free", "pro")`,
        `entity "Team", read rule at and[3]: 1 is not a valid boolean value for Team.active`,
        `entity "Team", read rule at and[4]: 2.5 is not a valid integer value for Team.seats`,
        `entity "Team", read rule at and[5]: Team.name is compared with null; use isNull instead`,
        `entity "Team", read rule at and[6]: operator "isNull" does not apply to Team.name (it takes eq, ne, lt, lte, gt, gte, in, notIn, startsWith, contains)`,
        `entity "Team", read rule at and[7]: operator "startsWith" does not apply to Team.seats (it takes eq, ne, lt, lte, gt, gte, in, notIn)`,
        `entity "Team", read rule at and[8]: Team.seats (integer) cannot be compared with the principal's subject (a free string)`,
        `entity "Team", read rule at and[10].not.exists(Doc): path "titel": Doc has no field "titel"`,
        `entity "Team", visible condition: a visibility condition depends on the principal only, but "eq" reads the row (path "active")`,
        `entity "Team": has no field "notes" to hide`,
        `entity "Doc", read rule at or[1]: path "team" ends at relationship "team"; name a field of Team after it`,
        `entity "Doc", read rule at or[2]: path "owner.name": Doc has no relationship "owner"`,
        `entity "Doc", read rule at or[3]: exists: entity "Grnt" is not defined`,
        `entity "Doc", read rule at or[5]: exists: Grant.docId (text) cannot equal Doc.rank (integer)`,
        `entity "Grant": the record id cannot be hidden`,
        `operation "Doc.delete": not defined in catalog "shop"`,
        `operation "Doc.create": is targetless, so it has no target rule (constrain its input with references)`,
        `operation "Doc.rename": reference "teamId" is not a field of the operation's input (title)`,
        `operation "Grant.add": reference "subject" needs an entity (no relationship of Grant goes through "subject")`
      ])
    }))

  it.effect("a role list compared with an enumerated field is accepted; a claim list too", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const policy = yield* Policy.compile(
        c,
        Policy.make({
          entities: [Policy.entity(Grant, { read: and(isIn("level", principal.roles), isIn("docId", principal.claimList("docs"))) })],
          operations: []
        })
      )
      const reader = principalOf("u", { roles: ["read"], claims: { docs: ["d1", "d2"] } })
      assert.deepStrictEqual(policy.rowScope(reader, "Grant"), RowScope.where({
        op: "and",
        filters: [
          { op: "in", path: ["level"], value: ["read"] },
          { op: "in", path: ["docId"], value: ["d1", "d2"] }
        ]
      }))
    }))
})

describe("CompiledPolicy.view", () => {
  it.effect("substitutes the principal into row scopes and folds principal conditions", () =>
    Effect.gen(function* () {
      const policy = yield* compiled
      const alice = principalOf("alice", { claims: { team: "red" } })
      const view = policy.view(alice)
      assert.deepStrictEqual(view.rowScope("Team"), RowScope.where({ op: "eq", path: ["name"], value: "red" }))
      assert.deepStrictEqual(
        view.rowScope("Doc"),
        RowScope.where({
          op: "or",
          filters: [
            { op: "eq", path: ["ownerSub"], value: "alice" },
            { op: "exists", entity: "Grant", field: "docId", path: ["id"], where: { op: "eq", path: ["subject"], value: "alice" } }
          ]
        })
      )
      const admin = policy.view(principalOf("root", { roles: ["admin"] }))
      assert.deepStrictEqual(admin.rowScope("Team"), RowScope.all)
      assert.deepStrictEqual(admin.rowScope("Doc"), RowScope.all)
    }))

  it.effect("one view per principal identity: claims no rule reads do not matter, a claim a rule reads does", () =>
    Effect.gen(function* () {
      const policy = yield* compiled
      const first = policy.view(principalOf("alice", { claims: { team: "red", exp: 1, jti: "a" } }))
      // Another token of the same person: the same view, built once.
      assert.strictEqual(policy.view(principalOf("alice", { claims: { team: "red", exp: 2, jti: "b" } })), first)
      // The team claim is read by a rule: another team, another view, with its own row scope.
      const blue = policy.view(principalOf("alice", { claims: { team: "blue", exp: 1 } }))
      assert.notStrictEqual(blue, first)
      assert.deepStrictEqual(blue.rowScope("Team"), RowScope.where({ op: "eq", path: ["name"], value: "blue" }))
      // A claim that is absent is not the same as one that is present.
      const none = policy.view(principalOf("alice"))
      assert.notStrictEqual(none, first)
      assert.deepStrictEqual(none.rowScope("Team"), RowScope.none)
      // Roles and scopes are part of the identity.
      assert.notStrictEqual(policy.view(principalOf("alice", { roles: ["admin"], claims: { team: "red" } })), first)
      assert.notStrictEqual(policy.view(principalOf("alice", { scopes: ["grants"], claims: { team: "red" } })), first)
      assert.notStrictEqual(policy.view(principalOf("bob", { claims: { team: "red" } })), first)
    }))

  it.effect("hides entities, fields and operations whose conditions fail; unlisted ones never exist", () =>
    Effect.gen(function* () {
      const policy = yield* compiled
      const alice = policy.view(principalOf("alice", { claims: { team: "red" } }))
      assert.deepStrictEqual(alice.entities().map((e) => e.name), ["Doc", "Team"])
      assert.isUndefined(alice.entity("Grant"))
      assert.deepStrictEqual(alice.rowScope("Grant"), RowScope.none)
      assert.isUndefined(alice.field("Team", "note"))
      assert.isDefined(alice.field("Team", "name"))
      assert.deepStrictEqual(alice.operations().map((o) => `${o.owner}.${o.name}`), ["Doc.create", "Doc.rename"])

      const admin = policy.view(principalOf("root", { roles: ["admin"], scopes: ["grants"] }))
      assert.deepStrictEqual(admin.entities().map((e) => e.name), ["Doc", "Grant", "Team"])
      assert.isDefined(admin.field("Team", "note"))
      assert.deepStrictEqual(admin.operations().map((o) => `${o.owner}.${o.name}`), ["Doc.create", "Doc.rename", "Grant.add"])
      // Grant.add is visible only with the Grant entity itself.
      const adminWithoutScope = policy.view(principalOf("root", { roles: ["admin"] }))
      assert.isUndefined(adminWithoutScope.operation("Grant", "add"))

      const empty = yield* Policy.compile(yield* catalog, Policy.make({ entities: [], operations: [] }))
      assert.deepStrictEqual(empty.view(principalOf("root", { roles: ["admin"] })).entities(), [])
    }))

  it.effect("a comparison with a missing or mistyped claim never grants, not even under not", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const policy = yield* Policy.compile(
        c,
        Policy.make({
          entities: [
            Policy.entity(Team, { read: or(eq("name", principal.claim("team")), hasRole("admin")) }),
            Policy.entity(Doc, { read: not(eq("title", principal.claim("team"))) }),
            Policy.entity(Grant, { read: and(always, not(and(eq("subject", "x"), not(eq("docId", principal.claim("doc")))))) })
          ],
          operations: []
        })
      )
      const noClaim = principalOf("bob")
      assert.deepStrictEqual(policy.rowScope(noClaim, "Team"), RowScope.none)
      assert.deepStrictEqual(policy.rowScope(noClaim, "Doc"), RowScope.none)
      // Under two nots the comparison is positive again: false, so the inner and is false.
      assert.deepStrictEqual(policy.rowScope(noClaim, "Grant"), RowScope.where({ op: "not", filter: { op: "eq", path: ["subject"], value: "x" } }))
      const mistyped = principalOf("bob", { claims: { team: 7 } })
      assert.deepStrictEqual(policy.rowScope(mistyped, "Team"), RowScope.none)
      // An admin is granted by the other branch, whatever the claim.
      assert.deepStrictEqual(policy.rowScope(principalOf("root", { roles: ["admin"] }), "Team"), RowScope.all)
      const red = principalOf("bob", { claims: { team: "red" } })
      assert.deepStrictEqual(policy.rowScope(red, "Doc"), RowScope.where({ op: "not", filter: { op: "eq", path: ["title"], value: "red" } }))
    }))

  it.effect("hasClaim and hasScope decide on the principal alone", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const policy = yield* Policy.compile(
        c,
        Policy.make({
          entities: [Policy.entity(Team, { read: always, visible: or(hasClaim("plan", "pro"), hasScope("teams:read")) })],
          operations: []
        })
      )
      assert.isDefined(policy.view(principalOf("a", { claims: { plan: "pro" } })).entity("Team"))
      assert.isDefined(policy.view(principalOf("a", { claims: { plan: ["free", "pro"] } })).entity("Team"))
      assert.isDefined(policy.view(principalOf("a", { scopes: ["teams:read"] })).entity("Team"))
      assert.isUndefined(policy.view(principalOf("a", { claims: { plan: "free" } })).entity("Team"))
    }))
})

describe("CompiledPolicy.mutation", () => {
  it.effect("targets include the owner's read scope; input ids become references", () =>
    Effect.gen(function* () {
      const policy = yield* compiled
      const alice = principalOf("alice", { claims: { team: "red" } })
      const rename = policy.mutation(alice, operationRef("Doc", "rename"))
      const read = policy.rowScope(alice, "Doc") as Extract<RowScope.RowScope, { _tag: "Where" }>
      assert.deepStrictEqual(rename, {
        _tag: "Allow",
        target: RowScope.where({
          op: "and",
          filters: [
            read.filter,
            {
              op: "or",
              filters: [
                { op: "eq", path: ["ownerSub"], value: "alice" },
                {
                  op: "exists",
                  entity: "Grant",
                  field: "docId",
                  path: ["id"],
                  where: { op: "and", filters: [{ op: "eq", path: ["subject"], value: "alice" }, { op: "eq", path: ["level"], value: "write" }] }
                }
              ]
            }
          ]
        }),
        references: []
      })
      // Doc.create's teamId goes through Doc.team: an implicit reference into the Team read scope.
      assert.deepStrictEqual(policy.mutation(alice, operationRef("Doc", "create")), {
        _tag: "Allow",
        references: [{ inputField: "teamId", entity: "Team", scope: RowScope.where({ op: "eq", path: ["name"], value: "red" }) }]
      })
      assert.deepStrictEqual(policy.mutation(alice, operationRef("Grant", "add")), { _tag: "Deny" })
      assert.deepStrictEqual(policy.mutation(alice, operationRef("Doc", "nope")), { _tag: "Deny" })
      const admin = principalOf("root", { roles: ["admin"], scopes: ["grants"] })
      assert.deepStrictEqual(policy.mutation(admin, operationRef("Grant", "add")), {
        _tag: "Allow",
        references: [
          { inputField: "copyOf", entity: "Grant", scope: RowScope.where({ op: "eq", path: ["subject"], value: "root" }) },
          { inputField: "docId", entity: "Doc", scope: RowScope.all }
        ]
      })
    }))

  it.effect("denies a targeted operation when no target could qualify", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const policy = yield* Policy.compile(
        c,
        Policy.make({
          entities: [Policy.entity(Doc, { read: hasRole("reader") })],
          operations: [Policy.operation(DocRename, { target: hasRole("writer") })]
        })
      )
      assert.deepStrictEqual(policy.mutation(principalOf("a", { roles: ["reader"] }), operationRef("Doc", "rename")), { _tag: "Deny" })
      assert.deepStrictEqual(policy.mutation(principalOf("a", { roles: ["reader", "writer"] }), operationRef("Doc", "rename")), {
        _tag: "Allow",
        target: RowScope.all,
        references: []
      })
      // The operation stays visible to a reader: a per-principal visibility would need `visible`.
      assert.isDefined(policy.view(principalOf("a", { roles: ["reader"] })).operation("Doc", "rename"))
    }))
})

describe("CompiledPolicy.digest", () => {
  it.effect("is stable across compilations and key order, and changes with any rule", () =>
    Effect.gen(function* () {
      const c = yield* catalog
      const a = yield* compiled
      const b = yield* compiled
      assert.strictEqual(a.digest, b.digest)
      // The same rules written with keys and entries in another order.
      const reordered = yield* Policy.compile(
        c,
        Policy.make({
          operations: [...shopPolicy.operations].reverse(),
          entities: [...shopPolicy.entities].reverse().map((e) => Object.fromEntries(Object.entries(e).reverse()) as Policy.EntityPolicy)
        })
      )
      assert.strictEqual(reordered.digest, a.digest)
      const changed = yield* Policy.compile(
        c,
        Policy.make({
          entities: shopPolicy.entities.map((e) => (e.entity === "Team" ? Policy.entity(Team, { read: e.read }) : e)),
          operations: shopPolicy.operations
        })
      )
      assert.notStrictEqual(changed.digest, a.digest)
      const value = yield* Policy.compile(
        c,
        Policy.make({
          entities: shopPolicy.entities,
          operations: shopPolicy.operations.map((o) => (o.name === "rename" ? Policy.operation(DocRename, { target: eq("ownerSub", principal.subject) }) : o))
        })
      )
      assert.notStrictEqual(value.digest, a.digest)
      // The catalog token covers the policy: same definitions, different policies, different tokens.
      assert.strictEqual(a.catalog.definitionsDigest, c.definitionsDigest)
      assert.notStrictEqual(a.catalog.token, c.token)
      assert.notStrictEqual(changed.catalog.token, a.catalog.token)
      assert.strictEqual(a.catalog.token, c.withPolicyDigest(a.digest).token)
      // A view's token is a version per definition it shows; the whole-catalog token is still admitted.
      assert.match(a.view(principalOf("x")).token, /^v2\./)
      assert.isTrue(a.view(principalOf("x")).admits(a.catalog.token, []))
    }))
})

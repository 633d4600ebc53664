// The tracker's policy for admin, owner, editor, viewer and non-member: what describe
// shows them (hidden definitions and fields answer exactly as nonexistent ones), which
// rows they read (row scopes evaluated over a small data set), and which operations
// they may invoke on which targets and references.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Entity, RootSchema } from "@cairn/catalog"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { DescribeLimits, describe as describeCatalog } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { DatabaseKey } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { toPublicBody, type PublicError } from "@cairn/domain/PublicError"
import { Policy } from "@cairn/policy"
import { inScope, type Lookup, permits, type RecordValue } from "@cairn/policy/Evaluate"
import { Member, MemberAdd, ProjectArchive, tracker } from "@cairn/tracker/tracker"
import { trackerPolicy } from "@cairn/tracker/policy"

const Keys = Layer.merge(Sealer.layer(Redacted.make("tracker-policy-test")), DescribeLimits.layer())

const who = (subject: string, roles: ReadonlyArray<string> = []) =>
  new Principal({ subject, roles, scopes: ["cairn:read", "cairn:write"], claims: { sub: subject, org: "acme" }, databaseKey: DatabaseKey.make("acme") })

const admin = who("root", ["admin"])
const alice = who("alice") // owner of P1
const bob = who("bob") // editor of P1
const carol = who("carol") // viewer of P1
const dave = who("dave") // owner of P2
const erin = who("erin") // member of nothing
const everyone = { admin, alice, bob, carol, dave, erin }

const at = "2026-01-01T00:00:00.000Z"
const stamp = { createdAt: at, updatedAt: at }
const data: Record<string, ReadonlyArray<RecordValue>> = {
  Project: ["P1", "P2", "P3"].map((id) => ({ id, name: id, archived: false, ...stamp })),
  Member: [
    { id: "M1", projectId: "P1", subject: "alice", role: "owner", email: "alice@example.com", ...stamp },
    { id: "M2", projectId: "P1", subject: "bob", role: "editor", ...stamp },
    { id: "M3", projectId: "P1", subject: "carol", role: "viewer", ...stamp },
    { id: "M4", projectId: "P2", subject: "dave", role: "owner", ...stamp }
  ],
  Task: [
    { id: "T1", projectId: "P1", title: "one", status: "open", ...stamp },
    { id: "T2", projectId: "P1", title: "two", status: "done", ...stamp },
    { id: "T3", projectId: "P2", title: "three", status: "open", ...stamp },
    { id: "T4", projectId: "P3", title: "four", status: "open", ...stamp }
  ],
  Comment: [
    { id: "C1", taskId: "T1", body: "by bob", authorId: "bob", ...stamp },
    { id: "C2", taskId: "T1", body: "by alice", authorId: "alice", ...stamp },
    { id: "C3", taskId: "T3", body: "by dave", authorId: "dave", ...stamp },
    { id: "C4", taskId: "T2", body: "by carol", authorId: "carol", ...stamp }
  ],
  Label: [
    { id: "L1", projectId: "P1", name: "bug", color: "#ff0000", ...stamp },
    { id: "L2", projectId: "P2", name: "bug", color: "#ff0000", ...stamp }
  ]
}
const lookup: Lookup = (entity, field, value) => (data[entity] ?? []).filter((r) => r[field] === value)
const row = (entity: string, id: string) => data[entity]!.find((r) => r["id"] === id)!

const setup = Effect.gen(function* () {
  const catalog = yield* compile(tracker)
  const policy = yield* Policy.compile(catalog, trackerPolicy)
  return { catalog, policy }
})

const visibleIds = (catalog: Catalog, view: View, entity: string) =>
  data[entity]!.filter((r) => inScope(catalog, entity, view.rowScope(entity), r, lookup)).map((r) => r["id"])

const may = (policy: Policy.CompiledPolicy, principal: Principal, owner: string, name: string, request: { target?: string; input?: unknown }) =>
  permits(
    policy.catalog,
    owner,
    policy.mutation(principal, operationRef(owner, name)),
    { ...(request.target ? { target: row(owner, request.target) } : {}), input: request.input ?? {} },
    lookup
  )

/** Who of `everyone` may do it, in a stable order. */
const whoMay = (policy: Policy.CompiledPolicy, owner: string, name: string, request: { target?: string; input?: unknown }) =>
  Object.entries(everyone)
    .filter(([, p]) => may(policy, p, owner, name, request))
    .map(([n]) => n)

describe("tracker policy: visibility", () => {
  it.effect("everyone sees the five entities; only admins see Member.email, Project.archive and Member.add", () =>
    Effect.gen(function* () {
      const { policy } = yield* setup
      for (const [name, principal] of Object.entries(everyone)) {
        const view = policy.view(principal)
        assert.deepStrictEqual(view.entities().map((e) => e.name), ["Comment", "Label", "Member", "Project", "Task"], name)
        const operations = view.operations().map((o) => `${o.owner}.${o.name}`)
        const isAdmin = principal === admin
        assert.strictEqual(view.field("Member", "email") !== undefined, isAdmin, name)
        assert.isDefined(view.field("Member", "subject"))
        assert.deepStrictEqual(
          operations,
          [
            "Comment.add",
            "Comment.edit",
            ...(isAdmin ? ["Member.add", "Project.archive"] : []),
            "Project.create",
            "Task.assign",
            "Task.complete",
            "Task.create",
            "Task.rename",
            "Task.reopen"
          ],
          name
        )
      }
    }))

  it.effect("describe answers a hidden operation or field exactly as for one that does not exist", () =>
    Effect.gen(function* () {
      const { policy } = yield* setup
      // The same catalog without what the policy hides from non-admins.
      const { email: _, ...memberFields } = Member.fields
      const MemberWithoutEmail = Entity.make("Member", { ...Member, fields: memberFields })
      const bare = yield* compile(
        RootSchema.make("tracker", {
          traits: tracker.traits,
          entities: tracker.entities.map((e) => (e.name === "Member" ? MemberWithoutEmail : e)),
          operations: tracker.operations.filter((o) => o !== ProjectArchive && o !== MemberAdd)
        })
      )
      const bareView = View.full(bare)
      const editorView = policy.view(bob)
      const archive = { inspect: [operationRef("Project", "archive")] }
      const hidden = yield* Effect.flip(describeCatalog(editorView, archive))
      const missing = yield* Effect.flip(describeCatalog(bareView, archive))
      assert.deepStrictEqual(toPublicBody(hidden as PublicError), toPublicBody(missing as PublicError))
      assert.strictEqual(hidden._tag, "Inaccessible")

      const member = { inspect: [{ kind: "entity" as const, name: "Member" }] }
      const seen = yield* describeCatalog(editorView, member)
      const bareSeen = yield* describeCatalog(bareView, member)
      assert.deepStrictEqual(seen.definitions, bareSeen.definitions)
      assert.deepStrictEqual(seen.cards, bareSeen.cards)
      const operations = { browse: { kinds: ["operation" as const] }, page: { limit: 100 } }
      assert.deepStrictEqual((yield* describeCatalog(editorView, operations)).cards, (yield* describeCatalog(bareView, operations)).cards)
      // Admins do see them.
      const adminSeen = yield* describeCatalog(policy.view(admin), member)
      assert.include((adminSeen.cards[0]!.fields ?? []) as Array<string>, "email")
    }).pipe(Effect.provide(Keys)))

  it.effect("the compiled catalog token covers the policy; views admit it", () =>
    Effect.gen(function* () {
      const { catalog, policy } = yield* setup
      const again = yield* Policy.compile(catalog, trackerPolicy)
      assert.strictEqual(again.digest, policy.digest)
      assert.strictEqual(policy.catalog.token, catalog.withPolicyDigest(policy.digest).token)
      assert.notStrictEqual(policy.catalog.token, catalog.token)
      // A view's token is a version per definition it shows; the whole-catalog token is still admitted.
      assert.match(policy.view(bob).token, /^v2\./)
      assert.isTrue(policy.view(bob).admits(policy.catalog.token, []))
    }))
})

describe("tracker policy: rows", () => {
  it.effect("members read their projects and those projects' members, tasks, comments and labels", () =>
    Effect.gen(function* () {
      const { catalog, policy } = yield* setup
      const expected = {
        admin: { Project: ["P1", "P2", "P3"], Member: ["M1", "M2", "M3", "M4"], Task: ["T1", "T2", "T3", "T4"], Comment: ["C1", "C2", "C3", "C4"], Label: ["L1", "L2"] },
        alice: { Project: ["P1"], Member: ["M1", "M2", "M3"], Task: ["T1", "T2"], Comment: ["C1", "C2", "C4"], Label: ["L1"] },
        dave: { Project: ["P2"], Member: ["M4"], Task: ["T3"], Comment: ["C3"], Label: ["L2"] },
        erin: { Project: [], Member: [], Task: [], Comment: [], Label: [] }
      }
      const asAlice = expected.alice
      const all = { ...expected, bob: asAlice, carol: asAlice }
      for (const [name, entities] of Object.entries(all)) {
        const view = policy.view(everyone[name as keyof typeof everyone])
        for (const [entity, ids] of Object.entries(entities)) {
          assert.deepStrictEqual(visibleIds(catalog, view, entity), ids, `${name} reading ${entity}`)
        }
      }
      assert.strictEqual(policy.view(admin).rowScope("Task")._tag, "All")
    }))

  it.effect("a project's creator sees it once the create handler adds them as its owner member", () =>
    Effect.gen(function* () {
      const { catalog, policy } = yield* setup
      const project = { id: "P9", name: "new", archived: false, ...stamp }
      const scope = policy.view(erin).rowScope("Project")
      const before: Lookup = lookup
      assert.isFalse(inScope(catalog, "Project", scope, project, before))
      const creator = { id: "M9", projectId: "P9", subject: "erin", role: "owner", ...stamp }
      const after: Lookup = (entity, field, value) => [...lookup(entity, field, value), ...(entity === "Member" && creator[field as keyof typeof creator] === value ? [creator] : [])]
      assert.isTrue(inScope(catalog, "Project", scope, project, after))
    }))
})

describe("tracker policy: operations", () => {
  it.effect("owners and editors change tasks of their projects; viewers and outsiders cannot", () =>
    Effect.gen(function* () {
      const { policy } = yield* setup
      for (const name of ["rename", "complete", "reopen", "assign"]) {
        assert.deepStrictEqual(whoMay(policy, "Task", name, { target: "T1" }), ["admin", "alice", "bob"], `Task.${name} T1`)
        assert.deepStrictEqual(whoMay(policy, "Task", name, { target: "T3" }), ["admin", "dave"], `Task.${name} T3`)
        assert.deepStrictEqual(whoMay(policy, "Task", name, { target: "T4" }), ["admin"], `Task.${name} T4`)
      }
      assert.deepStrictEqual(whoMay(policy, "Task", "create", { input: { projectId: "P1", title: "x" } }), ["admin", "alice", "bob"])
      assert.deepStrictEqual(whoMay(policy, "Task", "create", { input: { projectId: "P3", title: "x" } }), ["admin"])
      assert.deepStrictEqual(whoMay(policy, "Task", "create", { input: { projectId: "nope", title: "x" } }), [])
    }))

  it.effect("comments: editors add them, authors (still editors) edit their own, admins edit any", () =>
    Effect.gen(function* () {
      const { policy } = yield* setup
      assert.deepStrictEqual(whoMay(policy, "Comment", "add", { input: { taskId: "T1", body: "x" } }), ["admin", "alice", "bob"])
      assert.deepStrictEqual(whoMay(policy, "Comment", "add", { input: { taskId: "T3", body: "x" } }), ["admin", "dave"])
      assert.deepStrictEqual(whoMay(policy, "Comment", "edit", { target: "C1", input: { body: "x" } }), ["admin", "bob"])
      assert.deepStrictEqual(whoMay(policy, "Comment", "edit", { target: "C2", input: { body: "x" } }), ["admin", "alice"])
      // carol wrote C4 but is a viewer: viewers cannot mutate.
      assert.deepStrictEqual(whoMay(policy, "Comment", "edit", { target: "C4", input: { body: "x" } }), ["admin"])
    }))

  it.effect("only admins add members and archive projects; anyone creates projects", () =>
    Effect.gen(function* () {
      const { policy } = yield* setup
      for (const principal of [alice, bob, carol, erin]) {
        assert.deepStrictEqual(policy.mutation(principal, operationRef("Member", "add")), { _tag: "Deny" })
        assert.deepStrictEqual(policy.mutation(principal, operationRef("Project", "archive")), { _tag: "Deny" })
      }
      assert.deepStrictEqual(whoMay(policy, "Member", "add", { input: { projectId: "P3", subject: "erin", role: "viewer", email: "e@x.io" } }), ["admin"])
      assert.deepStrictEqual(whoMay(policy, "Project", "archive", { target: "P2" }), ["admin"])
      assert.deepStrictEqual(whoMay(policy, "Project", "create", { input: { name: "mine" } }), Object.keys(everyone))
      assert.deepStrictEqual(policy.mutation(erin, operationRef("Project", "create")), { _tag: "Allow", references: [] })
    }))
})

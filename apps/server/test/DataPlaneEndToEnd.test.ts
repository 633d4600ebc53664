// The data plane end to end: the server exactly as `npm start` assembles it, real
// development tokens, and the generated `tracker` bindings over `/db/rpc`. It proves
// what the identity, policy and front promise together:
// - two orgs never see each other's data, whatever ids, cursors or invocation ids one
//   borrows from the other;
// - admin, owner, editor, viewer and non-member each do exactly what the policy says;
// - forged, misdirected and stale tokens are refused with 401 and `WWW-Authenticate`;
// - a hidden row, target, field or operation answers byte for byte like one that does
//   not exist;
// - an oversized body is refused and changes nothing.
import { assert, describe, it } from "@effect/vitest"
import { type CallError } from "@cairn/client/Bindings"
import { CairnClient } from "@cairn/client/CairnClient"
import { newInvocationId } from "@cairn/client/InvocationId"
import { tracker } from "@cairn/client/generated/tracker"
import { Effect, Either } from "effect"
import { exportSPKI, generateKeyPair, importJWK, SignJWT } from "jose"
import { type Running, startApp } from "./support/app.js"

interface Failure {
  readonly _tag: string
  readonly message: string
  readonly [field: string]: unknown
}

/** The failure of a call that must fail, as a plain object: its tag, message and every other field. */
const failure = <A>(call: Effect.Effect<A, CallError>): Effect.Effect<Failure> =>
  Effect.flatMap(Effect.either(call), (result) =>
    Either.isLeft(result)
      ? Effect.succeed({ ...result.left, message: result.left.message })
      : Effect.dieMessage(`expected a failure, got ${JSON.stringify(result.right)}`)
  )

const ids = { select: { id: { path: ["id"] } } } as const

interface Raw {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** One RPC exchange on the wire, so answers can be compared byte for byte. */
const rawRpc = (app: Running, token: string | undefined, tag: string, payload: unknown) =>
  Effect.promise(async (): Promise<Raw> => {
    const response = await fetch(`${app.base}/db/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
      body: JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })
    })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const operation = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })

describe("two orgs", () => {
  it.scopedLive("never see each other's data: every id, cursor and invocation id of one is nothing to the other", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      // An admin of the other org: the widest view there is in globex.
      const gina = app.as(yield* app.token({ sub: "gina", org: "globex", roles: ["admin"] }))

      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* alice(tracker.Task.create({ input: { projectId: project, title: "first" } }))).output.id
      yield* alice(tracker.Task.create({ input: { projectId: project, title: "second" } }))
      const comment = (yield* alice(tracker.Comment.add({ input: { taskId: task, body: "hello" } }))).output.id
      const member = (yield* alice(tracker.Member.query(ids))).rows[0]!.id
      const renameInvocation = newInvocationId()
      yield* alice(tracker.Task.rename({ target: task, input: { title: "renamed" }, invocationId: renameInvocation }))
      const firstPage = yield* alice(tracker.Task.query({ ...ids, page: { first: 1 } }))
      assert.isString(firstPage.cursor)

      const ginaProject = (yield* gina(tracker.Project.create({ input: { name: "Globex" } }))).output.id
      const ginaTask = (yield* gina(tracker.Task.create({ input: { projectId: ginaProject, title: "mine" } }))).output.id

      // Every id of acme, looked up by id in every entity: nothing.
      for (const id of [project, task, comment, member]) {
        const where = { op: "eq", path: ["id"], value: id } as const
        assert.deepStrictEqual((yield* gina(tracker.Project.query({ ...ids, where }))).rows, [])
        assert.deepStrictEqual((yield* gina(tracker.Task.query({ ...ids, where }))).rows, [])
        assert.deepStrictEqual((yield* gina(tracker.Comment.query({ ...ids, where }))).rows, [])
        assert.deepStrictEqual((yield* gina(tracker.Member.query({ ...ids, where }))).rows, [])
      }
      // Listing everything shows only globex.
      assert.deepStrictEqual((yield* gina(tracker.Project.query(ids))).rows, [{ id: ginaProject }])
      assert.deepStrictEqual((yield* gina(tracker.Task.query(ids))).rows, [{ id: ginaTask }])
      assert.deepStrictEqual((yield* gina(tracker.Comment.query(ids))).rows, [])

      // Targets and references of acme answer exactly like ids that never existed.
      const missing = "01a20000-0000-7000-8000-000000000000"
      const renameOf = (target: string) => failure(gina(tracker.Task.rename({ target, input: { title: "x" } })))
      assert.deepStrictEqual(yield* renameOf(task), yield* renameOf(missing))
      const archiveOf = (target: string) => failure(gina(tracker.Project.archive({ target })))
      assert.deepStrictEqual(yield* archiveOf(project), yield* archiveOf(missing))
      assert.strictEqual((yield* archiveOf(project))._tag, "Inaccessible")
      const editOf = (target: string) => failure(gina(tracker.Comment.edit({ target, input: { body: "x" } })))
      assert.deepStrictEqual(yield* editOf(comment), yield* editOf(missing))
      const createIn = (projectId: string) => failure(gina(tracker.Task.create({ input: { projectId, title: "x" } })))
      assert.deepStrictEqual(yield* createIn(project), yield* createIn(missing))

      // A cursor is bound to its caller and database: refused, never continued.
      const borrowed = yield* failure(gina(tracker.Task.query({ ...ids, page: { first: 1, after: firstPage.cursor! } })))
      assert.strictEqual(borrowed._tag, "InvalidQuery")
      assert.notInclude(JSON.stringify(borrowed), task)

      // Alice's invocation id names nothing in globex: the same intent is judged afresh
      // there (inaccessible), and a different intent under it commits as globex's own.
      const replayed = yield* failure(gina(tracker.Task.rename({ target: task, input: { title: "renamed" }, invocationId: renameInvocation })))
      assert.deepStrictEqual(replayed, yield* renameOf(missing))
      const own = yield* gina(tracker.Task.rename({ target: ginaTask, input: { title: "ours" }, invocationId: renameInvocation }))
      assert.strictEqual(own.outcome, "committed")
      assert.deepStrictEqual(
        (yield* gina(tracker.Task.query({ select: { title: { path: ["title"] } } }))).rows,
        [{ title: "ours" }]
      )

      // And acme is untouched by all of it.
      const acmeTitles = (yield* alice(tracker.Task.query({ select: { title: { path: ["title"] } }, order: [{ path: ["title"], direction: "asc" }] }))).rows
      assert.deepStrictEqual(acmeTitles, [{ title: "renamed" }, { title: "second" }])
      assert.deepStrictEqual((yield* alice(tracker.Project.query(ids))).rows, [{ id: project }])
    }), 30_000)
})

describe("roles", () => {
  it.scopedLive("admin, owner, editor, viewer and non-member do what the tracker's policy says", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const ed = app.as(yield* app.token({ sub: "ed", org: "acme" }))
      const vera = app.as(yield* app.token({ sub: "vera", org: "acme" }))
      const nora = app.as(yield* app.token({ sub: "nora", org: "acme" }))

      // Alice creates a project and owns it; only an admin may add members.
      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const memberInput = (subject: string, role: "editor" | "viewer") => ({ input: { projectId: project, subject, role, email: `${subject}@acme.test` } })
      const notAnOperation = yield* failure(alice(tracker.Member.add(memberInput("ed", "editor"))))
      assert.strictEqual(notAnOperation._tag, "Inaccessible")
      yield* root(tracker.Member.add(memberInput("ed", "editor")))
      yield* root(tracker.Member.add(memberInput("vera", "viewer")))

      // describe: the admin-only operations and the admin-only field exist for the admin alone.
      const operationNames = (caller: typeof root) =>
        Effect.map(caller(Effect.flatMap(CairnClient, (c) => c.describe({ browse: { kinds: ["operation"] }, page: { limit: 100 } }))), (r) =>
          r.cards.map((card) => (card.ref.kind === "operation" ? `${card.ref.owner.name}.${card.ref.name}` : "")).sort()
        )
      const adminOnly = ["Member.add", "Project.archive"]
      const rootOps = yield* operationNames(root)
      for (const name of adminOnly) assert.include(rootOps, name)
      for (const caller of [alice, ed, vera, nora]) {
        const names = yield* operationNames(caller)
        for (const name of adminOnly) assert.notInclude(names, name)
        assert.include(names, "Task.rename")
      }
      const memberFields = (caller: typeof root) =>
        Effect.map(caller(Effect.flatMap(CairnClient, (c) => c.describe({ inspect: [{ kind: "entity", name: "Member" }] }))), (r) =>
          Object.keys((r.definitions![0] as { fields: Record<string, unknown> }).fields)
        )
      assert.include(yield* memberFields(root), "email")
      assert.notInclude(yield* memberFields(alice), "email")
      assert.include(yield* memberFields(alice), "subject")

      // Reading: the admin reads emails; members do not, and the field behaves as absent.
      const emails = yield* root(tracker.Member.query({ select: { subject: { path: ["subject"] }, email: { path: ["email"] } }, order: [{ path: ["subject"], direction: "asc" }] }))
      assert.deepStrictEqual(emails.rows, [
        { subject: "alice", email: null },
        { subject: "ed", email: "ed@acme.test" },
        { subject: "vera", email: "vera@acme.test" }
      ])
      const hiddenField = yield* failure(ed(tracker.Member.query({ select: { e: { path: ["email"] } } })))
      const noField = yield* failure(ed(tracker.Member.query({ select: { e: { path: ["emial" as "email"] } } })))
      assert.strictEqual(hiddenField._tag, "Inaccessible")
      assert.strictEqual(JSON.stringify(hiddenField), JSON.stringify(noField).replaceAll("emial", "email"))

      // Editing: the editor creates, renames and comments; the viewer only reads.
      const task = (yield* ed(tracker.Task.create({ input: { projectId: project, title: "draft" } }))).output.id
      yield* ed(tracker.Task.rename({ target: task, input: { title: "plan" } }))
      const comment = (yield* ed(tracker.Comment.add({ input: { taskId: task, body: "first" } }))).output.id
      yield* ed(tracker.Comment.edit({ target: comment, input: { body: "edited" } }))
      assert.deepStrictEqual((yield* vera(tracker.Task.query({ select: { title: { path: ["title"] } } }))).rows, [{ title: "plan" }])
      assert.deepStrictEqual((yield* vera(tracker.Comment.query({ select: { body: { path: ["body"] } } }))).rows, [{ body: "edited" }])

      const missing = "01a20000-0000-7000-8000-000000000000"
      const renameBy = (caller: typeof root, target: string) => failure(caller(tracker.Task.rename({ target, input: { title: "nope" } })))
      assert.deepStrictEqual(yield* renameBy(vera, task), yield* renameBy(vera, missing))
      assert.deepStrictEqual(yield* renameBy(vera, task), {
        _tag: "Inaccessible",
        message: "No accessible Task has this id. Use an id returned by a query or a create operation."
      })
      const createBy = (caller: typeof root, projectId: string) => failure(caller(tracker.Task.create({ input: { projectId, title: "nope" } })))
      assert.deepStrictEqual(yield* createBy(vera, project), yield* createBy(vera, missing))
      // The owner may change tasks too, but only an author edits a comment.
      yield* alice(tracker.Task.complete({ target: task }))
      const editBy = (caller: typeof root, target: string) => failure(caller(tracker.Comment.edit({ target, input: { body: "hijack" } })))
      assert.deepStrictEqual(yield* editBy(alice, comment), yield* editBy(alice, missing))

      // The non-member sees nothing of the project and can touch nothing in it.
      assert.deepStrictEqual((yield* nora(tracker.Project.query(ids))).rows, [])
      assert.deepStrictEqual((yield* nora(tracker.Task.query(ids))).rows, [])
      assert.deepStrictEqual((yield* nora(tracker.Member.query(ids))).rows, [])
      assert.deepStrictEqual(yield* renameBy(nora, task), yield* renameBy(nora, missing))
      assert.deepStrictEqual(yield* createBy(nora, project), yield* createBy(nora, missing))

      // The admin sees and does everything, including archiving.
      yield* root(tracker.Project.archive({ target: project }))
      assert.deepStrictEqual((yield* root(tracker.Project.query({ select: { archived: { path: ["archived"] } } }))).rows, [{ archived: true }])
      // None of the refused calls changed anything.
      const final = yield* root(tracker.Task.query({ select: { title: { path: ["title"] }, status: { path: ["status"] } } }))
      assert.deepStrictEqual(final.rows, [{ title: "plan", status: "done" }])
      assert.deepStrictEqual((yield* root(tracker.Comment.query({ select: { body: { path: ["body"] } } }))).rows, [{ body: "edited" }])
    }), 30_000)
})

describe("hidden versus nonexistent", () => {
  it.scopedLive("answers are byte for byte the same on the wire", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const aliceToken = yield* app.token({ sub: "alice", org: "acme" })
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const viewer = yield* app.token({ sub: "vera", org: "acme" })
      const outsider = yield* app.token({ sub: "nora", org: "acme" })
      const alice = app.as(aliceToken)
      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const task = (yield* alice(tracker.Task.create({ input: { projectId: project, title: "t" } }))).output.id
      yield* root(tracker.Member.add({ input: { projectId: project, subject: "vera", role: "viewer", email: "v@acme.test" } }))
      const missing = "01a20000-0000-7000-8000-000000000000"

      const rename = (token: string, id: string) =>
        rawRpc(app, token, "Mutate", {
          operation: operation("Task", "rename"),
          target: { kind: "entity", entity: "Task", id },
          input: { title: "x" },
          invocationId: "01a20000-0000-7000-8000-0000000000aa"
        })
      const create = (token: string, projectId: string) =>
        rawRpc(app, token, "Mutate", {
          operation: operation("Task", "create"),
          input: { projectId, title: "x" },
          invocationId: "01a20000-0000-7000-8000-0000000000bb"
        })
      const archive = (token: string, id: string) =>
        rawRpc(app, token, "Mutate", {
          operation: operation("Project", "archive"),
          target: { kind: "entity", entity: "Project", id },
          input: {},
          invocationId: "01a20000-0000-7000-8000-0000000000cc"
        })
      const cases: ReadonlyArray<readonly [string, Raw, Raw]> = [
        // A target the viewer can see but not change, and one outside the outsider's view.
        ["viewer target", yield* rename(viewer, task), yield* rename(viewer, missing)],
        ["outsider target", yield* rename(outsider, task), yield* rename(outsider, missing)],
        ["viewer reference", yield* create(viewer, project), yield* create(viewer, missing)],
        ["outsider reference", yield* create(outsider, project), yield* create(outsider, missing)],
        // A hidden operation on an existing target against the same on a missing one.
        ["hidden operation", yield* archive(aliceToken, project), yield* archive(aliceToken, missing)]
      ]
      for (const [name, hidden, absent] of cases) {
        assert.strictEqual(hidden.status, 200, name)
        assert.strictEqual(hidden.text, absent.text, name)
        assert.notInclude(hidden.text, task, name)
        assert.notInclude(hidden.text, project, name)
      }
      assert.include(cases[0]![1].text, '"_tag":"Inaccessible"')
      assert.include(cases[4]![1].text, '"_tag":"Inaccessible"')
      // A hidden operation reads like an operation that was never defined.
      const neverDefined = yield* rawRpc(app, aliceToken, "Mutate", {
        operation: operation("Project", "demolish"),
        target: { kind: "entity", entity: "Project", id: project },
        input: {},
        invocationId: "01a20000-0000-7000-8000-0000000000cc"
      })
      assert.strictEqual(neverDefined.text.replaceAll("demolish", "archive"), cases[4]![1].text)
    }), 30_000)
})

describe("tokens", () => {
  it.scopedLive("forged, misdirected, stale and claimless tokens get 401 with WWW-Authenticate", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const now = Math.floor(Date.now() / 1000)
      const devKey = yield* Effect.promise(() => importJWK(app.dev.key.privateJwk, "ES256"))
      const claims = { sub: "mallory", org: "acme", roles: ["admin"], scope: "cairn:read cairn:write" }
      type Overrides = { readonly iss?: string; readonly aud?: string; readonly exp?: number; readonly nbf?: number; readonly payload?: object }
      const sign = (key: Parameters<SignJWT["sign"]>[0], header: { alg: string; kid?: string }, o: Overrides = {}) =>
        Effect.promise(() =>
          new SignJWT({ ...claims, ...o.payload })
            .setProtectedHeader({ typ: "at+jwt", ...header })
            .setIssuer(o.iss ?? app.dev.issuer)
            .setAudience(o.aud ?? `${app.base}/db`)
            .setIssuedAt(now - 5)
            .setNotBefore(o.nbf ?? now - 5)
            .setExpirationTime(o.exp ?? now + 600)
            .sign(key)
        )
      const withDevKey = (o: Overrides = {}) => sign(devKey, { alg: "ES256", kid: app.dev.key.kid }, o)
      const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url")
      const unsigned = `${b64({ alg: "none", typ: "JWT" })}.${b64({ ...claims, iss: app.dev.issuer, aud: `${app.base}/db`, exp: now + 600 })}.`
      const otherKey = yield* Effect.promise(() => generateKeyPair("ES256"))
      const publicPem = yield* Effect.promise(async () => {
        const key = await importJWK(app.dev.key.publicJwk, "ES256")
        return exportSPKI(key as CryptoKey)
      })
      const { org: _org, ...withoutOrg } = claims

      // The control: the same forging path with the real key and right claims is accepted.
      const control = yield* rawRpc(app, yield* withDevKey(), "Describe", { browse: { kinds: ["entity"] } })
      assert.strictEqual(control.status, 200)
      assert.include(control.text, '"_tag":"Success"')

      const attacks: ReadonlyArray<readonly [string, string]> = [
        ["alg none", unsigned],
        ["HMAC keyed with the public key", yield* sign(new TextEncoder().encode(publicPem), { alg: "HS256", kid: app.dev.key.kid })],
        ["another key under the trusted kid", yield* sign(otherKey.privateKey, { alg: "ES256", kid: app.dev.key.kid })],
        ["audience of the MCP resource", yield* withDevKey({ aud: `${app.base}/mcp` })],
        ["foreign audience", yield* withDevKey({ aud: "https://elsewhere.example/db" })],
        ["foreign issuer", yield* withDevKey({ iss: "https://evil.example" })],
        ["expired", yield* withDevKey({ exp: now - 600 })],
        ["not yet valid", yield* withDevKey({ nbf: now + 600 })],
        ["no database claim", yield* app.token({ sub: withoutOrg.sub, roles: withoutOrg.roles })],
        ["garbage", "not.a.jwt"]
      ]
      for (const [name, token] of attacks) {
        const answer = yield* rawRpc(app, token, "Describe", { browse: { kinds: ["entity"] } })
        assert.strictEqual(answer.status, 401, name)
        assert.match(answer.headers.get("www-authenticate") ?? "", /^Bearer realm="cairn", error="invalid_token", error_description="[^"]+"$/, name)
        const body = JSON.parse(answer.text) as { error: string; message: string; requestId: string }
        assert.strictEqual(body.error, "invalid_token", name)
        assert.strictEqual(body.requestId, answer.headers.get("x-request-id"), name)
        assert.notInclude(answer.text, "Tracker", name)
      }
      // And none of them reached the data: a mutation under each changed nothing.
      for (const [name, token] of attacks) {
        const answer = yield* rawRpc(app, token, "Mutate", {
          operation: operation("Project", "create"),
          input: { name: "pwned" },
          invocationId: newInvocationId()
        })
        assert.strictEqual(answer.status, 401, name)
      }
      const admin = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      assert.deepStrictEqual((yield* admin(tracker.Project.query(ids))).rows, [])
      // No token at all is a challenge without an error code (RFC 6750 §3.1).
      const anonymous = yield* rawRpc(app, undefined, "Describe", { browse: { kinds: ["entity"] } })
      assert.strictEqual(anonymous.status, 401)
      assert.strictEqual(anonymous.headers.get("www-authenticate"), 'Bearer realm="cairn"')
    }), 30_000)
})

describe("body limit", () => {
  it.scopedLive("an oversized body is refused with 413 and a clear error, and changes nothing", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_MAX_BODY_BYTES: "4096" } })
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const project = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id

      const tooBig = yield* failure(alice(tracker.Task.create({ input: { projectId: project, title: "x".repeat(10_000) } })))
      assert.strictEqual(tooBig._tag, "PayloadTooLarge")
      assert.include(tooBig.message, "4096")

      const raw = yield* rawRpc(app, yield* app.token({ sub: "alice", org: "acme" }), "Mutate", {
        operation: operation("Task", "create"),
        input: { projectId: project, title: "y".repeat(10_000) },
        invocationId: newInvocationId()
      })
      assert.strictEqual(raw.status, 413)
      const body = JSON.parse(raw.text) as { message: string; requestId: string }
      assert.include(body.message, "4096")
      assert.strictEqual(body.requestId, raw.headers.get("x-request-id"))

      // Nothing was written, and the next request of normal size works.
      assert.deepStrictEqual((yield* alice(tracker.Task.query(ids))).rows, [])
      yield* alice(tracker.Task.create({ input: { projectId: project, title: "fits" } }))
      assert.deepStrictEqual((yield* alice(tracker.Task.query({ select: { title: { path: ["title"] } } }))).rows, [{ title: "fits" }])
    }), 30_000)
})

describe("malformed requests", () => {
  it.scopedLive("an untyped caller's malformed request is the server's typed error naming the issue, not a client defect", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const badQuery = yield* failure(
        alice(
          Effect.flatMap(CairnClient, (c) =>
            c.query({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: { id: ["id"] } } as never })
          )
        )
      )
      assert.strictEqual(badQuery._tag, "InvalidQuery")
      assert.include(badQuery.message, "/query/select/id")
      const badMutate = yield* failure(
        alice(Effect.flatMap(CairnClient, (c) => c.mutate({ operation: { kind: "operation", name: "create" }, input: {} } as never)))
      )
      assert.strictEqual(badMutate._tag, "InvalidInput")
      assert.include(badMutate.message, "invocationId")
    }), 30_000)
})

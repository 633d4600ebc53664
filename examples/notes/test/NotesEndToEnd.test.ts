// The notes example end to end, through its own `App` (the tracker's engine, nothing of
// the tracker): two database deployments chosen only by verified claims, over RPC, MCP and
// sync. A personal database is its user's alone and never the team's; a team shares only
// what its authors shared and sees nothing of another team; a token naming no database
// deployment, an unknown one or several is refused with 401 on every way in; and what is
// hidden answers exactly as what does not exist.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type Answer, type Claims, mcp, rpc, type Running, snapshot, startNotes } from "./support.js"

const Note = { kind: "entity", name: "Note" } as const
const operation = (name: string) => ({ kind: "operation", owner: Note, name })
const target = (id: string) => ({ kind: "entity", entity: "Note", id })
const titles = { version: 1, from: Note, select: { title: { path: ["title"] } }, order: [{ path: ["title"], direction: "asc" }] }
const scope = { scope: { entities: [{ from: Note }] } }

const personal = (sub: string): Claims => ({ sub, cairn_db: "personal" })
const team = (sub: string, org: string): Claims => ({ sub, cairn_db: "teams", org })

const create = (app: Running, who: Claims, title: string, shared?: boolean) =>
  Effect.gen(function* () {
    const answer = yield* rpc(app, yield* app.token(who), "Mutate", {
      operation: operation("create"),
      input: { title, body: `${title} body`, ...(shared === undefined ? {} : { shared }) },
      invocationId: uuidv7()
    })
    assert.strictEqual(answer.value?.outcome, "committed", answer.text.slice(0, 300))
    return answer.value.output.id as string
  })

/** The titles `who` sees, on RPC, MCP and sync alike (the three must agree). */
const seen = (app: Running, who: Claims) =>
  Effect.gen(function* () {
    const viaRpc = yield* rpc(app, yield* app.token(who), "Query", { query: titles })
    const viaMcp = yield* mcp(app, yield* app.token({ ...who, resource: "mcp" }), "query", { query: titles })
    const viaSync = yield* snapshot(app, yield* app.token(who), scope)
    for (const answer of [viaRpc, viaMcp, viaSync]) assert.isUndefined(answer.error, answer.text.slice(0, 300))
    const fromRpc = (viaRpc.value.rows as Array<{ title: string }>).map((row) => row.title)
    const fromMcp = (viaMcp.value.rows as Array<{ title: string }>).map((row) => row.title)
    const fromSync = (viaSync.value.records as Array<{ record: { title: string } }>).map((r) => r.record.title).sort()
    assert.deepStrictEqual(fromMcp, fromRpc, "MCP and RPC disagree")
    assert.deepStrictEqual(fromSync, fromRpc, "sync and RPC disagree")
    return fromRpc
  })

const mutate = (app: Running, who: Claims, name: string, id: string, input: unknown) =>
  Effect.flatMap(app.token(who), (token) => rpc(app, token, "Mutate", { operation: operation(name), target: target(id), input, invocationId: uuidv7() }))

/** The same public error, status aside from the body (the request id differs). */
const sameError = (label: string, a: Answer, b: Answer) => {
  assert.isDefined(a.error, `${label}: ${a.text.slice(0, 300)}`)
  assert.deepStrictEqual(a.error, b.error, label)
}

describe("the notes example through its own App", () => {
  it.scopedLive("a personal database is its user's alone: invisible to other users, to the team and to an org of the same name", () =>
    Effect.gen(function* () {
      const app = yield* startNotes
      yield* create(app, personal("alice"), "alice diary")
      yield* create(app, team("alice", "acme"), "acme plan", true)
      assert.deepStrictEqual(yield* seen(app, personal("alice")), ["alice diary"])
      assert.deepStrictEqual(yield* seen(app, personal("bob")), [])
      // Alice's team database is another database: her personal note is not there, and vice versa.
      assert.deepStrictEqual(yield* seen(app, team("alice", "acme")), ["acme plan"])
      // An org named "alice" is not the user alice: the keys are namespaced by database deployment.
      assert.deepStrictEqual(yield* seen(app, team("alice", "alice")), [])
      yield* create(app, team("alice", "alice"), "org alice note")
      assert.deepStrictEqual(yield* seen(app, personal("alice")), ["alice diary"])
      // A personal note can never be shared, and sharing does not exist there.
      const shared = yield* rpc(app, yield* app.token(personal("alice")), "Mutate", {
        operation: operation("create"),
        input: { title: "x", body: "y", shared: true },
        invocationId: uuidv7()
      })
      assert.strictEqual(shared.error?.code, "operation_rejected")
      const diaryId = (yield* rpc(app, yield* app.token(personal("alice")), "Query", { query: { ...titles, select: { id: { path: ["id"] } } } })).value.rows[0].id
      // Sharing is hidden in a personal database: answered exactly as an operation that does not exist.
      const hidden = yield* mutate(app, personal("alice"), "share", diaryId, {})
      const absent = yield* mutate(app, personal("alice"), "publish", diaryId, {})
      assert.strictEqual(hidden.error?.code, "inaccessible", hidden.text.slice(0, 300))
      assert.deepStrictEqual(hidden.error, { ...absent.error!, message: absent.error!.message.replace(`.publish"`, `.share"`) })
      // Bob cannot reach alice's note by its id: his personal database has no such note.
      sameError("another user's note reads like a nonexistent one", yield* mutate(app, personal("bob"), "edit", diaryId, { body: "mine" }), yield* mutate(app, personal("bob"), "edit", "no-such-note", { body: "mine" }))
    })
  )

  it.scopedLive("a team shares what its authors shared, keeps the rest private, and sees nothing of another team", () =>
    Effect.gen(function* () {
      const app = yield* startNotes
      const plan = yield* create(app, team("alice", "acme"), "acme plan", true)
      const draft = yield* create(app, team("alice", "acme"), "acme draft")
      yield* create(app, team("gina", "globex"), "globex secret", true)
      assert.deepStrictEqual(yield* seen(app, team("alice", "acme")), ["acme draft", "acme plan"])
      assert.deepStrictEqual(yield* seen(app, team("bob", "acme")), ["acme plan"])
      assert.deepStrictEqual(yield* seen(app, team("gina", "globex")), ["globex secret"])
      assert.deepStrictEqual(yield* seen(app, team("bob", "globex")), ["globex secret"])
      // A teammate reads a shared note but cannot edit it; a private draft is as absent as no note at all.
      const missing = yield* mutate(app, team("bob", "acme"), "edit", "no-such-note", { body: "x" })
      sameError("another author's shared note", yield* mutate(app, team("bob", "acme"), "edit", plan, { body: "x" }), missing)
      sameError("another author's private draft", yield* mutate(app, team("bob", "acme"), "edit", draft, { body: "x" }), missing)
      sameError("another team's id", yield* mutate(app, team("gina", "globex"), "edit", plan, { body: "x" }), yield* mutate(app, team("gina", "globex"), "edit", "no-such-note", { body: "x" }))
      sameError("sharing another's draft", yield* mutate(app, team("bob", "acme"), "share", draft, {}), yield* mutate(app, team("bob", "acme"), "share", "no-such-note", {}))
      // The author shares the draft; the teammate then sees it, the other team still does not.
      assert.strictEqual((yield* mutate(app, team("alice", "acme"), "share", draft, {})).value?.outcome, "committed")
      assert.deepStrictEqual(yield* seen(app, team("bob", "acme")), ["acme draft", "acme plan"])
      assert.deepStrictEqual(yield* seen(app, team("bob", "globex")), ["globex secret"])
      // MCP writes to the database its token selects, like RPC.
      const viaMcp = yield* mcp(app, yield* app.token({ ...team("bob", "acme"), resource: "mcp" }), "mutate", {
        operation: operation("create"),
        input: { title: "acme notes by bob", body: "b", shared: true },
        invocationId: uuidv7()
      })
      assert.strictEqual(viaMcp.value?.outcome, "committed", viaMcp.text.slice(0, 300))
      assert.deepStrictEqual(yield* seen(app, team("alice", "acme")), ["acme draft", "acme notes by bob", "acme plan"])
      assert.deepStrictEqual(yield* seen(app, personal("bob")), [])
    })
  )

  it.scopedLive("describe shows sharing only where it exists", () =>
    Effect.gen(function* () {
      const app = yield* startNotes
      const operations = (who: Claims) =>
        Effect.map(
          Effect.flatMap(app.token({ ...who, resource: "mcp" }), (token) => mcp(app, token, "describe", { browse: { kinds: ["operation"] } })),
          (answer) => (answer.value.cards as Array<{ ref: { name: string } }>).map((card) => card.ref.name).sort()
        )
      assert.deepStrictEqual(yield* operations(personal("alice")), ["create", "edit"])
      assert.deepStrictEqual(yield* operations(team("alice", "acme")), ["create", "edit", "share"])
    })
  )

  it.scopedLive("a token that selects no database deployment, an unknown one or several is refused with 401 on every way in", () =>
    Effect.gen(function* () {
      const app = yield* startNotes
      const cases: ReadonlyArray<readonly [string, Omit<Claims, "sub">, RegExp]> = [
        ["no selector", { org: "acme" }, /does not say which database/],
        ["several", { cairn_db: ["personal", "teams"], org: "acme" }, /more than one database/],
        ["unknown", { cairn_db: "tenants", org: "acme" }, /names no database/],
        ["not a string", { cairn_db: 1, org: "acme" }, /names no database/],
        ["teams without org", { cairn_db: "teams" }, /lacks the "org" claim/]
      ]
      for (const [label, claims, description] of cases) {
        const db = yield* app.token({ sub: "alice", ...claims })
        const agent = yield* app.token({ sub: "alice", ...claims, resource: "mcp" })
        for (const answer of [yield* rpc(app, db, "Query", { query: titles }), yield* snapshot(app, db, scope), yield* mcp(app, agent, "query", { query: titles })]) {
          assert.strictEqual(answer.status, 401, `${label}: ${answer.text.slice(0, 200)}`)
          assert.include(answer.headers.get("www-authenticate") ?? "", `error="invalid_token"`, label)
          assert.match(JSON.parse(answer.text).error_description, description, label)
          assert.notInclude(answer.text, "acme", label)
        }
      }
    })
  )
})

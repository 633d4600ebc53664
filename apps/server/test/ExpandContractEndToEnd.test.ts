// The staged way to rename a field over databases holding data, as the README's "Changing your
// catalog" walks it, with the real CLI and server: expand (add `body`, optional; deprecate
// `text` in favour of it; a migration copies text → body in batches), require (`body` becomes
// required: validated against every stored row), contract (remove `text`, covered by a declared
// migration). Each stage passes `cairn check`, its plan says what it does, old clients keep
// working until the contract stage changes the definition they use; tools/list never changes.
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { appDirectory, cairn, killAll, rpc, serve, syncCall } from "./support/cli.js"

afterAll(killAll)

type Stage = 0 | 1 | 2 | 3

const fieldsOf: Record<Stage, string> = {
  0: `text: Schema.String`,
  1: `text: Schema.String, body: Schema.optional(Schema.String)`,
  2: `text: Schema.String, body: Schema.String`,
  3: `body: Schema.String`
}

const copy = `Migration.make({
  name: "copy-text-to-body",
  description: "Copy each note's text into body, 3 notes per batch.",
  step: (tx: any) => Effect.gen(function* () {
    const todo = yield* tx.findBy("Note", { body: undefined })
    for (const note of todo.slice(0, 3)) yield* tx.patch("Note", note.id, { body: note.text })
    return todo.length > 3 ? "more" : "done"
  })
})`
const drop = `Migration.make({ name: "drop-text", description: "Notes no longer keep text; body holds it.", covers: ["Note.text"] })`

const app = (stage: Stage, options: { readonly withoutDrop?: boolean } = {}) => `
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"

const Note = Entity.make("Note", {
  description: "A note.",
  fields: { ${fieldsOf[stage]} },
  ${stage === 1 || stage === 2 ? `deprecatedFields: { text: { reason: "Renamed to body; text will be removed.", replacement: "body" } },` : ""}
})
const NoteCreate = Operation.make({
  owner: Note, name: "create", description: "Create a note.", targeted: false,
  input: Schema.Struct({ text: Schema.String }), output: Schema.Struct({ id: Schema.String })
})
const notes = RootSchema.make("notes", {
  entities: [Note],
  operations: [NoteCreate],
  migrations: [${stage >= 1 ? copy : ""}${stage === 3 && !options.withoutDrop ? `, ${drop}` : ""}]
})

export const deployment = {
  root: notes,
  policy: Policy.make({ entities: [Policy.entity("Note", { read: Rule.always })], operations: [Policy.operation(NoteCreate)] }),
  handlers: Handlers.make({ entities: [Note], operations: [NoteCreate] }, {
    "Note.create": ({ input, tx }) => Effect.map(tx.insert("Note", ${
      stage === 0 ? "{ text: input.text }" : stage === 3 ? "{ body: input.text }" : "{ text: input.text, body: input.text }"
    } as any), (id) => ({ id }))
  } as any),
  databases: [{ name: "notebooks", schema: "notes", keyClaim: "org" }]
}
`

const create = (text: string, n: number) => ({
  operation: { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "create" },
  input: { text },
  invocationId: `0192f000-0000-7000-8000-${String(n).padStart(12, "0")}`
})
const select = (...fields: ReadonlyArray<string>) => ({
  version: 1,
  from: { kind: "entity", name: "Note" },
  select: Object.fromEntries(fields.map((f) => [f, { path: [f] }])),
  order: [{ path: ["id"], direction: "asc" }]
})

const toolsList = async (base: string, token: string) => {
  const response = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
  })
  const body = (await response.json()) as { result: { tools: ReadonlyArray<{ name: string; inputSchema: unknown }> } }
  return body.result.tools
}

describe("expand / contract: renaming a field over stored data", () => {
  it("expand, backfill, require, contract: each stage checks, serves and keeps old clients working until the contract", async () => {
    const dir = appDirectory()
    const file = (stage: Stage, suffix = "") => {
      const path = join(dir, `stage${stage}${suffix}.ts`)
      writeFileSync(path, app(stage, suffix === "-nodrop" ? { withoutDrop: true } : {}))
      return path
    }
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-expand-data-"))
    const env = { CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`, CAIRN_STAGE: "test" }
    const base = `http://127.0.0.1:${port}`

    // Stage 0: notes with text, and a client that inspected this catalog.
    let server = await serve(file(0), env)
    const token = (await cairn(["token", "--sub", "alice", "--org", "acme"], env)).stdout.trim()
    const mcpToken = (await cairn(["token", "--sub", "alice", "--org", "acme", "--resource", "mcp"], env)).stdout.trim()
    for (let i = 1; i <= 7; i++) expect((await rpc(base, token, "Mutate", create(`note ${i}`, i)))._tag).toBe("Success")
    const oldToken: string = (await rpc(base, token, "Describe", { browse: { kinds: ["entity"] } })).value.catalogToken
    const tools = await toolsList(base, mcpToken)
    expect(tools.map((t) => t.name)).toEqual(["describe", "query", "mutate"])
    // A sync client of Note: its snapshot and cursor, kept across every stage.
    const scope = { entities: [{ from: { kind: "entity", name: "Note" } }] }
    const replica = new Map<string, Record<string, unknown>>()
    let after: string | undefined
    let cursor = ""
    for (;;) {
      const page = (await syncCall(base, token, "SyncSnapshot", { scope, ...(after ? { after } : {}) })).values[0]
      for (const r of page.records) replica.set(r.id, r.record)
      if (page.checkpoint) {
        cursor = page.checkpoint.cursor
        break
      }
      after = page.next
    }
    expect(replica.size).toBe(7)
    // Bindings generated for this stage, and a program that uses them (run later against newer releases).
    expect((await cairn(["bindings", "--app", file(0), "--out", join(dir, "notes-bindings.ts")], env)).code).toBe(0)
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
    writeFileSync(
      join(dir, "old-client.ts"),
      `import { Effect } from "effect"
import { CairnClient } from "@cairn/client/CairnClient"
import { notes } from "./notes-bindings.js"
const program = Effect.gen(function* () {
  const created = yield* notes.Note.create({ input: { text: process.argv[2]! } })
  const read = yield* notes.Note.query({ select: { text: { path: ["text"] } } })
  return { outcome: created.outcome, texts: read.rows.map((r) => r.text) }
})
Effect.runPromise(program.pipe(Effect.provide(CairnClient.layerFetch({ baseUrl: process.env.BASE!, token: process.env.TOKEN! })))).then(
  (result) => console.log(JSON.stringify(result)),
  (error) => { console.error(String(error)); process.exit(1) }
)
`
    )
    const oldClient = (text: string) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", join(dir, "old-client.ts"), text], { cwd: dir, env: { ...process.env, BASE: base, TOKEN: token }, stdio: ["ignore", "pipe", "pipe"] })
        let out = ""
        child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d))
        child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d))
        child.on("exit", (code) => resolve({ code, out }))
      })
    /** Applies the changes after the cursor; answers a resnapshot's reason, if one came. */
    const pull = async () => {
      const { values } = await syncCall(base, token, "SyncChanges", { scope, cursor, live: false })
      for (const message of values) {
        if (message._tag === "Resnapshot") return message.reason as string
        for (const change of message.changes) {
          if (change._tag === "Upsert") replica.set(change.id, change.record)
          else replica.delete(change.id)
        }
        cursor = message.checkpoint.cursor
      }
      return undefined
    }
    /** The replica equals what a query reads now (the oracle). */
    const converged = async (...fields: ReadonlyArray<string>) => {
      const rows = (await rpc(base, token, "Query", { query: { ...select(...fields), select: Object.fromEntries(["id", ...fields].map((f) => [f, { path: [f] }])) } })).value.rows
      expect([...replica.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([id, r]) => ({ id, ...Object.fromEntries(fields.map((f) => [f, r[f]])) }))).toEqual(rows)
    }
    expect(await server.stop()).toBe(0)

    // Stage 1, expand: body is new and optional, text deprecated in its favour, a migration copies text into body.
    const stage1 = file(1)
    expect((await cairn(["check", "--app", stage1], env)).code).toBe(0)
    const plan1 = await cairn(["migrate", "plan", "--app", stage1], env)
    expect(plan1.stdout).toContain(`additive: field "Note.body" is new and optional`)
    expect(plan1.stdout).toContain(`migration "copy-text-to-body" will run`)
    server = await serve(stage1, env)
    const inspected = await rpc(base, token, "Describe", { inspect: [{ kind: "entity", name: "Note" }] })
    expect(inspected.value.definitions[0].fields.text.deprecated).toEqual({ reason: "Renamed to body; text will be removed.", replacement: "body" })
    expect(inspected.value.definitions[0].fields.body.deprecated).toBeUndefined()
    const rows1 = await rpc(base, token, "Query", { ifCatalog: oldToken, query: select("text", "body") })
    expect(rows1._tag, JSON.stringify(rows1)).toBe("Success")
    expect(rows1.value.rows.every((r: { text: string; body: string }) => r.body === r.text)).toBe(true)
    expect(rows1.value.rows).toHaveLength(7)
    // An old client still creates notes, with its old token; tools/list is exactly as before.
    expect((await rpc(base, token, "Mutate", { ...create("note 8", 8), ifCatalog: oldToken }))._tag).toBe("Success")
    // Bindings generated before the change call the new server successfully.
    const viaBindings = await oldClient("from old bindings")
    expect(viaBindings.code, viaBindings.out).toBe(0)
    expect(JSON.parse(viaBindings.out).outcome).toBe("committed")
    expect(JSON.parse(viaBindings.out).texts).toContain("from old bindings")
    // The sync client resumes across the additive change, no resnapshot: the backfill arrives as changes.
    expect(await pull()).toBeUndefined()
    await converged("text", "body")
    expect(await toolsList(base, mcpToken)).toEqual(tools)
    expect(await server.stop()).toBe(0)

    // Stage 2: body becomes required, accepted because every stored note has one.
    const stage2 = file(2)
    const plan2 = await cairn(["migrate", "plan", "--app", stage2], env)
    expect(plan2.code, plan2.stderr).toBe(0)
    expect(plan2.stdout).toContain(`validated: field "Note.body" became required: every stored row satisfies it`)
    server = await serve(stage2, env)
    expect((await rpc(base, token, "Query", { ifCatalog: oldToken, query: select("text") }))._tag).toBe("Success")
    expect(await server.stop()).toBe(0)

    // Stage 3, contract: text is removed, which only a declared migration may do.
    const refused = await cairn(["check", "--app", file(3, "-nodrop")], env)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`refused (incompatible): field "Note.text" was removed (or renamed); declare a migration that covers "Note.text"`)
    const stage3 = file(3)
    const plan3 = await cairn(["migrate", "plan", "--app", stage3], env)
    expect(plan3.code, plan3.stderr).toBe(0)
    expect(plan3.stdout).toContain(`migrated: field "Note.text" was removed (or renamed) (covered by migration "drop-text")`)
    server = await serve(stage3, env)
    const rows3 = await rpc(base, token, "Query", { query: select("body") })
    expect(rows3.value.rows.map((r: { body: string }) => r.body)).toEqual([...Array.from({ length: 8 }, (_, i) => `note ${i + 1}`), "from old bindings"])
    // The definition an old client relied on changed incompatibly: its token is refused on Note.
    const stale = await rpc(base, token, "Query", { ifCatalog: oldToken, query: select("body") })
    expect(stale.cause?.error?._tag).toBe("CatalogChanged")
    // The sync client's scope changed incompatibly: a resnapshot, then it converges again.
    expect(await pull()).toBe("catalog_changed")
    replica.clear()
    const fresh = (await syncCall(base, token, "SyncSnapshot", { scope })).values[0]
    for (const r of fresh.records) replica.set(r.id, r.record)
    cursor = fresh.checkpoint.cursor
    expect((await rpc(base, token, "Mutate", create("note 9", 9)))._tag).toBe("Success")
    expect(await pull()).toBeUndefined()
    await converged("body")
    expect(await toolsList(base, mcpToken)).toEqual(tools)
    expect(await server.stop()).toBe(0)
  }, 300_000)
})

// Catalog evolution as an operator meets it, with real processes (`cairn` through tsx, as
// `npm run cairn` runs it) over an application written to a temporary directory: a notes app
// serves two databases holding data; a changed version that would reinterpret them is refused
// by `cairn check`, `cairn migrate plan` and `cairn serve` (before binding), each listing every
// problem of every database with counts and no values; an additive version serves, and a
// client's token and requests from before the change keep working. A change of stored type whose
// migration would drop stored values is refused by the plan until the migration converts every value.
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { appDirectory, cairn, killAll, rpc, serve } from "./support/cli.js"

afterAll(killAll)

/**
 * The notes application at one stage of its life: `fields` is the source of the Note's fields.
 * `extra` adds definitions (source text) after the Note.
 */
const notesApp = (fields: string, extra: { readonly entities?: string; readonly migrations?: string } = {}) => `
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"

const Note = Entity.make("Note", { description: "A note.", fields: { ${fields} } })
${extra.entities ?? ""}
const NoteCreate = Operation.make({
  owner: Note, name: "create", description: "Create a note.", targeted: false,
  input: Schema.Struct({ text: Schema.String, points: Schema.Int }), output: Schema.Struct({ id: Schema.String })
})
const notes = RootSchema.make("notes", { entities: [Note], operations: [NoteCreate], migrations: [${extra.migrations ?? ""}] })

export const deployment = {
  root: notes,
  policy: Policy.make({ entities: [Policy.entity("Note", { read: Rule.always })], operations: [Policy.operation(NoteCreate)] }),
  handlers: Handlers.make({ entities: [Note], operations: [NoteCreate] }, {
    "Note.create": ({ input, tx }) => Effect.map(tx.insert("Note", { text: input.text, points: input.points } as any), (id) => ({ id }))
  } as any),
  databases: [{ name: "notebooks", schema: "notes", keyClaim: "org" }]
}
`


const create = (text: string, points: number, n: number) => ({
  operation: { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "create" },
  input: { text, points },
  invocationId: `0192f000-0000-7000-8000-${String(n).padStart(12, "0")}`
})

describe("catalog evolution over databases holding data", () => {
  it("refuses a reinterpreting change at check, migrate plan and startup, listing every problem; serves an additive one to old clients", async () => {
    const dir = appDirectory()
    const v1 = join(dir, "v1.ts")
    writeFileSync(v1, notesApp(`text: Schema.String.pipe(Schema.maxLength(200)), points: Schema.Int`))
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-evolution-data-"))
    const env = { CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`, CAIRN_STAGE: "test" }
    const base = `http://127.0.0.1:${port}`

    // Two databases with data: acme's note is long, globex's short.
    let server = await serve(v1, env)
    const acme = (await cairn(["token", "--sub", "alice", "--org", "acme"], env)).stdout.trim()
    const globex = (await cairn(["token", "--sub", "bob", "--org", "globex"], env)).stdout.trim()
    expect((await rpc(base, acme, "Mutate", create("a secret long enough", 3, 1)))._tag).toBe("Success")
    expect((await rpc(base, globex, "Mutate", create("hey", 4, 2)))._tag).toBe("Success")
    const described = await rpc(base, acme, "Describe", { browse: { kinds: ["entity"] } })
    const oldToken: string = described.value.catalogToken
    expect(await server.stop()).toBe(0)

    // Integer → string everywhere, and maxLength 200 → 5, which only acme's note violates.
    const v2 = join(dir, "v2.ts")
    writeFileSync(v2, notesApp(`text: Schema.String.pipe(Schema.maxLength(5)), points: Schema.String`))
    const checked = await cairn(["check", "--app", v2], env)
    expect(checked.code).toBe(1)
    const problems = checked.stderr.split("\n").filter((l) => l.startsWith("  - catalog change: "))
    expect(problems).toHaveLength(3)
    expect(problems.filter((p) => p.includes(`field "Note.points" changed its stored type from integer to text`))).toHaveLength(2)
    expect(problems.filter((p) => p.includes(`field "Note.text" changed its constraints (maxLength 200 → 5): 1 stored row violates it`))).toHaveLength(1)
    expect(checked.stderr).not.toContain("secret")

    const planned = await cairn(["migrate", "plan", "--app", v2], env)
    expect(planned.code).toBe(1)
    expect(planned.stdout).toContain("REFUSED (2 problems)")
    expect(planned.stdout).toContain("REFUSED (1 problem)")
    expect(planned.stdout).toContain(`validated: field "Note.text" changed its constraints (maxLength 200 → 5): every stored row satisfies it`)
    expect(planned.stdout + planned.stderr).not.toContain("secret")

    const applied = await cairn(["migrate", "apply", "--app", v2], env)
    expect(applied.code).toBe(1)
    expect(applied.stdout).toContain("summary: 2 databases: 0 updated, 0 unchanged, 2 refused, 0 failed; 0 migration batches committed")
    expect(applied.stderr).toContain(`refused: refused (incompatible): field "Note.points" changed its stored type from integer to text`)

    const refused = await cairn(["serve", "--app", v2], env)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("Cairn cannot start: the catalog cannot be installed over the stored data (3 problems)")
    expect(refused.stderr.split("\n").filter((l) => l.includes("catalog change") || l.includes("refused ("))).toHaveLength(3)
    expect(refused.stderr + refused.stdout).not.toContain("Cairn listening on")

    // Additive: a new optional field and a relaxed constraint. Check passes; the server serves it.
    const v3 = join(dir, "v3.ts")
    writeFileSync(v3, notesApp(`text: Schema.String.pipe(Schema.maxLength(400)), points: Schema.Int, colour: Schema.optional(Schema.String)`))
    const ok = await cairn(["check", "--app", v3], env)
    expect(ok.code, ok.stderr).toBe(0)
    expect(ok.stdout).toContain("catalog installs over 2 databases")
    const plan3 = await cairn(["migrate", "plan", "--app", v3], env)
    expect(plan3.code, plan3.stderr).toBe(0)
    expect(plan3.stdout).toContain(`additive: field "Note.colour" is new and optional`)
    server = await serve(v3, env)
    const rows = await rpc(base, acme, "Query", { query: { version: 1, from: { kind: "entity", name: "Note" }, select: { text: { path: ["text"] }, points: { path: ["points"] } } } })
    expect(rows.value.rows).toEqual([{ text: "a secret long enough", points: 3 }])
    // An old client: its token from before the additive change still guards a query and a mutation.
    const guarded = await rpc(base, acme, "Query", { ifCatalog: oldToken, query: { version: 1, from: { kind: "entity", name: "Note" }, select: { points: { path: ["points"] } } } })
    expect(guarded._tag, JSON.stringify(guarded)).toBe("Success")
    const mutated = await rpc(base, globex, "Mutate", { ...create("again", 5, 3), ifCatalog: oldToken })
    expect(mutated._tag, JSON.stringify(mutated)).toBe("Success")
    expect(await server.stop()).toBe(0)
  }, 180_000)
})

/** A library at one stage: `isbn` is the Book's ISBN field's source; `migrations` the root schema's. */
const booksApp = (isbn: string, migrations = "") => `
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"

const Book = Entity.make("Book", { description: "A book.", fields: { title: Schema.String, isbn: ${isbn} } })
const BookAdd = Operation.make({
  owner: Book, name: "add", description: "Add a book.", targeted: false,
  input: Schema.Struct({ title: Schema.String, isbn: Schema.optional(Schema.String) }), output: Schema.Struct({ id: Schema.String })
})
const library = RootSchema.make("library", { entities: [Book], operations: [BookAdd], migrations: [${migrations}] })

export const deployment = {
  root: library,
  policy: Policy.make({ entities: [Policy.entity("Book", { read: Rule.always })], operations: [Policy.operation(BookAdd)] }),
  handlers: Handlers.make({ entities: [Book], operations: [BookAdd] }, {
    "Book.add": ({ input, tx }) => Effect.map(tx.insert("Book", input as any), (id) => ({ id }))
  } as any),
  databases: [{ name: "libraries", schema: "library", keyClaim: "org" }]
}
`

describe("a change of stored type over stored values", () => {
  it("is refused while its migration would drop a stored value; converted values are counted by the plan and kept by apply", async () => {
    const dir = appDirectory()
    const write = (name: string, text: string) => {
      const path = join(dir, name)
      writeFileSync(path, text)
      return path
    }
    const v1 = write("books1.ts", booksApp("Schema.optional(Schema.String)"))
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-retype-data-"))
    const env = { CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`, CAIRN_STAGE: "test" }
    const base = `http://127.0.0.1:${port}`
    let server = await serve(v1, env)
    const token = (await cairn(["token", "--sub", "alice", "--org", "acme"], env)).stdout.trim()
    const add = (input: Record<string, string>, n: number) =>
      rpc(base, token, "Mutate", {
        operation: { kind: "operation", owner: { kind: "entity", name: "Book" }, name: "add" },
        input,
        invocationId: `0192f000-0000-7000-8000-${String(n).padStart(12, "0")}`
      })
    expect((await add({ title: "Dune", isbn: "9780441569595" }, 1))._tag).toBe("Success")
    expect((await add({ title: "Untitled draft" }, 2))._tag).toBe("Success")
    expect(await server.stop()).toBe(0)

    // isbn: string → number, covered by a migration that converts nothing: the stored ISBN would become null.
    const lossy = write("books2.ts", booksApp("Schema.optional(Schema.Number)", `Migration.make({ name: "isbn-number", description: "ISBNs are numbers.", covers: ["Book.isbn"] })`))
    const planned = await cairn(["migrate", "plan", "--app", lossy], env)
    expect(planned.code).toBe(1)
    expect(planned.stdout).toContain("REFUSED (1 problem)")
    expect(planned.stdout).toContain(`refused (would lose data): field "Book.isbn" changed its stored type from text to real: 1 stored value would be lost`)
    expect(planned.stdout + planned.stderr).not.toContain("9780441569595")

    // With a conversion of every stored value: the plan counts it, apply keeps the value under its new type.
    const converting = write(
      "books3.ts",
      booksApp(
        "Schema.optional(Schema.Number)",
        `Migration.make({ name: "isbn-number", description: "ISBNs are numbers.", covers: ["Book.isbn"], convert: { "Book.isbn": (v) => Number(v) } })`
      )
    )
    const plan = await cairn(["migrate", "plan", "--app", converting], env)
    expect(plan.code, plan.stderr).toBe(0)
    expect(plan.stdout).toContain(`migrated: field "Book.isbn" changed its stored type from text to real (covered by migration "isbn-number"): 1 stored value converted`)
    const applied = await cairn(["migrate", "apply", "--app", converting], env)
    expect(applied.code, applied.stderr).toBe(0)
    expect(applied.stdout).toContain("1 updated")
    server = await serve(converting, env)
    const rows = await rpc(base, token, "Query", {
      query: { version: 1, from: { kind: "entity", name: "Book" }, select: { title: { path: ["title"] }, isbn: { path: ["isbn"] } }, order: [{ path: ["title"], direction: "asc" }] }
    })
    expect(rows.value.rows).toEqual([{ title: "Dune", isbn: 9780441569595 }, { title: "Untitled draft", isbn: null }])
    expect(await server.stop()).toBe(0)
  }, 180_000)
})

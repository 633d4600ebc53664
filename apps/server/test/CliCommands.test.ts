// The operator CLI's serve, check, token and bindings commands run as real processes
// (node with the tsx loader, as `npm run cairn` runs them) over applications written to a
// temporary directory that imports `@cairn/*` from the workspace: a broken one whose every
// problem `check` lists, a small one `serve --app` serves and `token` mints for, and the
// bindings `bindings --app` writes for it, type-checked by tsc.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { whenListening } from "./support/listening.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

/** `cairn <args>` as a process; the environment is the test's minus any `CAIRN_*`, plus `env`. */
const cairn = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Ran>((resolve) => {
    const started = performance.now()
    const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/cli.ts", ...args], {
      cwd: root,
      env: { ...cleanEnv(), ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("exit", (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }))
  })

const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("CAIRN_") && k !== "INIT_CWD"))

/** A directory outside the workspace whose modules resolve `@cairn/*` and `effect` from it. */
const appDirectory = () => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-cli-app-"))
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir")
  return dir
}

/** A small application: notes, with `create` and `archive`; `broken` spoils its policy and handlers. */
const notesModule = (broken: boolean) => `
import { Effect, Schema } from "effect"
import { Entity, Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"

const Note = Entity.make("Note", { description: "A note.", fields: { text: Schema.String, archived: Schema.Boolean } })
const NoteCreate = Operation.make({
  owner: Note, name: "create", description: "Create a note.", targeted: false,
  input: Schema.Struct({ text: Schema.String }), output: Schema.Struct({ id: Schema.String })
})
const NoteArchive = Operation.make({
  owner: Note, name: "archive", description: "Archive a note.", targeted: true,
  input: Schema.Struct({}), output: Schema.Struct({})
})
const notes = RootSchema.make("notes", { entities: [Note], operations: [NoteCreate, NoteArchive] })

export const deployment = {
  root: notes,
  policy: Policy.make({
    entities: [Policy.entity("Note", { read: ${broken ? 'Rule.eq("colour", "red")' : "Rule.always"} })],
    operations: [Policy.operation(NoteCreate), Policy.operation(NoteArchive)]
  }),
  handlers: Handlers.make({ entities: [Note], operations: [NoteCreate, NoteArchive] }, {
    "Note.create": ({ input, tx }) => Effect.map(tx.insert("Note", { text: input.text, archived: false }), (id) => ({ id }))${
      broken ? "" : `,
    "Note.archive": ({ target, tx }) => Effect.as(tx.patch("Note", target.id, { archived: true }), {})`
    }
  } as any),
  databases: [{ name: "notebooks", schema: "notes", keyClaim: "org" }]
}
`

const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

/** `cairn serve <args>` until it logs its URL. */
const serve = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/cli.ts", "serve", ...args], {
    cwd: root,
    env: { ...cleanEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  const { output } = await whenListening(child, "cairn serve")
  return {
    output,
    stop: () =>
      new Promise<number | null>((resolve) => {
        child.once("exit", (code) => resolve(code))
        child.kill("SIGTERM")
      })
  }
}

const rpc = async (base: string, token: string, tag: string, payload: unknown) => {
  const response = await fetch(`${base}/db/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ _tag: "Request", id: "1", tag, headers: [], payload })
  })
  return { status: response.status, body: (await response.json()) as ReadonlyArray<{ readonly exit: { readonly _tag: string; readonly value?: any } }> }
}

describe("cairn --help", () => {
  it("lists every command, and each command's options", async () => {
    const help = await cairn(["--help"])
    expect(help.code).toBe(0)
    for (const command of ["serve [--app text]", "check [--app text]", "token --sub text --org text", "bindings [--app text] [--out text] [--check]", "backup", "restore"]) {
      expect(help.stdout).toContain(command)
    }
    const token = await cairn(["token", "--help"])
    expect(token.code).toBe(0)
    for (const option of ["--sub", "--org", "--roles", "--scope", "--resource", "--ttl", "--base"]) expect(token.stdout).toContain(option)
  })
})

describe("cairn check", () => {
  it("lists every problem of a broken application and of the settings, and exits non-zero", async () => {
    const dir = appDirectory()
    writeFileSync(join(dir, "broken.ts"), notesModule(true))
    const { code, stderr, stdout } = await cairn(["check", "--app", join(dir, "broken.ts")], { CAIRN_PORT: "eighty", CAIRN_MAX_BODY_BYTES: "-1" })
    expect(code).toBe(1)
    expect(stdout).toBe("")
    const problems = stderr.split("\n").filter((l) => l.startsWith("  - "))
    expect(problems.find((p) => p.includes("policy:") && p.includes("colour"))).toBeDefined()
    expect(problems).toContain(`  - handlers: operation "Note.archive" has no handler`)
    expect(problems.find((p) => p.includes("CAIRN_PORT"))).toBeDefined()
    expect(problems.find((p) => p.includes("CAIRN_MAX_BODY_BYTES"))).toBeDefined()
    expect(stderr).toContain(`cannot be served; ${problems.length} problems:`)
  })

  it("passes the tracker with one OK line, refuses a public bind the exposure guard would refuse, and a module without a deployment", async () => {
    const ok = await cairn(["check"])
    expect(ok.code, ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(/^OK: tracker: root schema "tracker", 5 entities, 10 operations, policy and handlers complete; settings valid \(http:\/\/127\.0\.0\.1:8787, /)
    expect(ok.stdout.trim().split("\n")).toHaveLength(1)

    // A public bind without an external issuer and budgets: what the exposure guard would refuse at startup.
    const exposed = await cairn(["check"], { CAIRN_HOST: "0.0.0.0" })
    expect(exposed.code).toBe(1)
    expect(exposed.stderr).toContain("  - exposure: Refusing to start: the MCP endpoint would be reachable publicly (bind host 0.0.0.0")

    const dir = appDirectory()
    writeFileSync(join(dir, "empty.ts"), "export const notes = 1\n")
    const none = await cairn(["check", "--app", join(dir, "empty.ts")])
    expect(none.code).toBe(1)
    expect(none.stderr).toContain("the module must export `deployment` (a DeploymentDefinition: root, policy, handlers, databases); it exports notes")
  })
})

describe("cairn serve --app and cairn token", () => {
  it("serves a module's deployment; a token minted for it works, settings naming another server are refused", async () => {
    const dir = appDirectory()
    writeFileSync(join(dir, "notes.ts"), notesModule(false))
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-cli-data-"))
    const env = { CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`, CAIRN_STAGE: "test" }
    const server = await serve(["--app", join(dir, "notes.ts")], env)
    const base = `http://127.0.0.1:${port}`
    expect(server.output()).toContain("app notes")

    const health = await fetch(`${base}/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: "ok" })

    // Only the data directory: the issuer and base URL are the ones the server wrote there.
    const minted = await cairn(["token", "--sub", "alice", "--org", "acme"], { CAIRN_DATA_DIR: dataDir })
    expect(minted.code, minted.stderr).toBe(0)
    expect(minted.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/)
    const token = minted.stdout.trim()
    const described = await rpc(base, token, "Describe", { browse: { kinds: ["entity"] } })
    expect(described.status).toBe(200)
    expect(described.body[0]!.exit._tag).toBe("Success")
    expect(described.body[0]!.exit.value.cards.map((c: { ref: { name: string } }) => c.ref.name)).toEqual(["Note"])
    const created = await rpc(base, token, "Mutate", {
      operation: { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "create" },
      input: { text: "hello" },
      invocationId: "0192f000-0000-7000-8000-000000000001"
    })
    expect(created.body[0]!.exit._tag, JSON.stringify(created.body)).toBe("Success")
    const queried = await rpc(base, token, "Query", { query: { version: 1, from: { kind: "entity", name: "Note" }, select: { text: { path: ["text"] } } } })
    expect(queried.body[0]!.exit.value.rows).toEqual([{ text: "hello" }])

    // The same settings the server runs with are accepted; another port or data directory is named and refused.
    const same = await cairn(["token", "--sub", "alice", "--org", "acme", "--roles", "admin", "--resource", "mcp"], env)
    expect(same.code, same.stderr).toBe(0)
    // A second server refused the data directory's lock leaves the running server's record alone.
    const second = await cairn(["serve", "--app", join(dir, "notes.ts")], {
      ...env,
      CAIRN_PORT: String(await freePort()),
      CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`
    })
    expect(second.code).toBe(1)
    expect(second.stderr).toContain("another Cairn process is using")
    const still = await cairn(["token", "--sub", "alice", "--org", "acme"], { CAIRN_DATA_DIR: dataDir })
    expect(still.code, still.stderr).toBe(0)
    expect((await rpc(base, still.stdout.trim(), "Describe", { browse: { kinds: ["entity"] } })).body[0]!.exit._tag).toBe("Success")
    const otherPort = await cairn(["token", "--sub", "alice", "--org", "acme"], { ...env, CAIRN_PORT: String(port + 7) })
    expect(otherPort.code).toBe(1)
    expect(otherPort.stdout).toBe("")
    expect(otherPort.stderr).toContain(`serves ${base}, not http://127.0.0.1:${port + 7} (from CAIRN_PORT=${port + 7})`)
    const otherBase = await cairn(["token", "--sub", "alice", "--org", "acme", "--base", "http://localhost:9"], { CAIRN_DATA_DIR: dataDir })
    expect(otherBase.code).toBe(1)
    expect(otherBase.stderr).toContain(`serves ${base}, not http://localhost:9 (from --base)`)
    const otherDir = mkdtempSync(join(tmpdir(), "cairn-cli-empty-"))
    const elsewhere = await cairn(["token", "--sub", "alice", "--org", "acme"], { ...env, CAIRN_DATA_DIR: otherDir })
    expect(elsewhere.code).toBe(1)
    expect(elsewhere.stderr).toContain(`No running Cairn development server uses the data directory ${otherDir}`)
    console.log(`cairn token: ${[minted, same, otherPort].map((r) => `${r.ms.toFixed(0)} ms`).join(", ")}`)

    expect(await server.stop()).toBe(0)
    // Stopped: nothing to mint for any more.
    const stopped = await cairn(["token", "--sub", "alice", "--org", "acme"], { CAIRN_DATA_DIR: dataDir })
    expect(stopped.code).toBe(1)
    expect(stopped.stderr).toContain("No running Cairn development server uses")
  })
})

describe("cairn bindings --app", () => {
  it("writes bindings for a module's catalog that type-check against @cairn/client", async () => {
    const dir = appDirectory()
    writeFileSync(join(dir, "notes.ts"), notesModule(false))
    const out = join(dir, "notes-bindings.ts")
    const written = await cairn(["bindings", "--app", join(dir, "notes.ts"), "--out", out])
    expect(written.code, written.stderr).toBe(0)
    const source = readFileSync(out, "utf8")
    expect(source).toContain(`import { makeBindings } from "@cairn/client/Bindings"`)
    expect(source).toContain("export const notes = makeBindings<NotesSchema>")
    const fresh = await cairn(["bindings", "--app", join(dir, "notes.ts"), "--out", out, "--check"])
    expect(fresh.code, fresh.stderr).toBe(0)

    // A caller of the bindings: right inputs compile, a wrong one must not.
    writeFileSync(
      join(dir, "use.ts"),
      `import { notes } from "./notes-bindings.js"
export const create = notes.Note.create({ input: { text: "hello" } })
// @ts-expect-error text is a string
export const wrong = notes.Note.create({ input: { text: 1 } })
`
    )
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          exactOptionalPropertyTypes: true,
          skipLibCheck: true,
          noEmit: true,
          types: ["node"]
        },
        files: ["notes-bindings.ts", "use.ts"]
      })
    )
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }))
    const tsc = await new Promise<Ran>((resolve) => {
      const child = spawn(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", dir], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
      child.on("exit", (code) => resolve({ code, stdout, stderr: "", ms: 0 }))
    })
    expect(tsc.code, tsc.stdout).toBe(0)
  })
})

// A migration interrupted by SIGKILL at random points (the seed is printed; set
// CAIRN_TEST_SEED to repeat a run): the real server process serves a notes app whose new
// release backfills a field in batches of 5 on activation; it is killed -9 while the batches
// commit, its database file is inspected at each stop, and restarted. Every stop leaves the
// database at a batch boundary (rows backfilled = 5 × batches recorded = 5 × migration commits);
// `cairn migrate apply` finishes it (progress and summary), and a receipt from before the migration still replays identically.
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { appDirectory, cairn as run, killAll, rpc, serve } from "./support/cli.js"

afterAll(killAll)

const app = (release: 1 | 2) => `
import { Effect, Schema } from "effect"
import { Entity, Migration, Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { Handlers } from "@cairn/store"

const Note = Entity.make("Note", { description: "A note.", fields: { text: Schema.String${release === 2 ? ", colour: Schema.optional(Schema.String)" : ""} } })
const NoteSeed = Operation.make({
  owner: Note, name: "seed", description: "Create n notes.", targeted: false,
  input: Schema.Struct({ n: Schema.Int }), output: Schema.Struct({ created: Schema.Int })
})
const backfill = Migration.make({
  name: "backfill-colour",
  description: "Every note gets a colour, 5 per batch.",
  step: (tx: any) => Effect.gen(function* () {
    const todo = yield* tx.findBy("Note", { colour: undefined })
    for (const note of todo.slice(0, 5)) yield* tx.patch("Note", note.id, { colour: "grey" })
    // A batch with real work to do: 15 ms of it, synchronously (a writer transaction never waits on the event loop).
    const until = Date.now() + 15
    while (Date.now() < until) { /* busy */ }
    return todo.length > 5 ? "more" : "done"
  })
})
const notes = RootSchema.make("notes", { entities: [Note], operations: [NoteSeed]${release === 2 ? ", migrations: [backfill]" : ""} })

export const deployment = {
  root: notes,
  policy: Policy.make({ entities: [Policy.entity("Note", { read: Rule.always })], operations: [Policy.operation(NoteSeed)] }),
  handlers: Handlers.make({ entities: [Note], operations: [NoteSeed] }, {
    "Note.seed": ({ input, tx }) => Effect.gen(function* () {
      for (let i = 0; i < input.n; i++) yield* tx.insert("Note", { text: "note " + i } as any)
      return { created: input.n }
    })
  } as any),
  databases: [{ name: "notebooks", schema: "notes", keyClaim: "org" }]
}
`

/** A small deterministic generator (mulberry32). */
const rng = (seed: number) => () => {
  seed |= 0
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const NOTES = 120

/** What the killed server left in the database file. */
const inspect = (dataDir: string) => {
  const file = readdirSync(join(dataDir, "databases")).find((f: string) => f.endsWith(".sqlite"))!
  const db = new Database(join(dataDir, "databases", file))
  try {
    // Killed before the new version's schema step ran (a slow start), the column is not there yet: nothing migrated.
    const hasColour = (db.prepare(`SELECT count(*) AS n FROM pragma_table_info('Note') WHERE name = 'colour'`).get() as { n: number }).n > 0
    const coloured = hasColour ? (db.prepare(`SELECT count(*) AS n FROM "Note" WHERE colour IS NOT NULL`).get() as { n: number }).n : 0
    const hasProgress = (db.prepare(`SELECT count(*) AS n FROM sqlite_master WHERE name = '_cairn_migrations'`).get() as { n: number }).n > 0
    const progress = hasProgress ? (db.prepare(`SELECT batches, done FROM _cairn_migrations WHERE name = 'backfill-colour'`).get() as { batches: number; done: number } | undefined) : undefined
    const commits = (db.prepare(`SELECT count(*) AS n FROM _cairn_commits WHERE operation = '_cairn.migrate'`).get() as { n: number }).n
    const applied: ReadonlyArray<string> = JSON.parse((db.prepare(`SELECT representation FROM _cairn_install`).get() as { representation: string }).representation).migrations ?? []
    return { coloured, batches: progress?.batches ?? 0, done: progress?.done === 1, commits, applied }
  } finally {
    db.close()
  }
}

describe("a migration under SIGKILL", () => {
  it("stops only at batch boundaries, resumes on restart and finishes with migrate apply; old receipts replay identically", async () => {
    const seed = Number(process.env.CAIRN_TEST_SEED ?? Math.floor(Math.random() * 1_000_000))
    console.log(`MigrationKillEndToEnd seed=${seed} (CAIRN_TEST_SEED=${seed} repeats this run)`)
    const random = rng(seed)
    const dir = appDirectory()
    writeFileSync(join(dir, "v1.ts"), app(1))
    writeFileSync(join(dir, "v2.ts"), app(2))
    const port = await freePort()
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-migration-data-"))
    const env = { CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_DEV_ISSUER_URL: `http://127.0.0.1:${await freePort()}`, CAIRN_STAGE: "test" }
    const base = `http://127.0.0.1:${port}`

    let server = await serve(join(dir, "v1.ts"), env)
    const token = (await run(["token", "--sub", "alice", "--org", "acme"], env)).stdout.trim()
    const seedRequest = {
      operation: { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "seed" },
      input: { n: NOTES },
      invocationId: "0192f000-0000-7000-8000-000000000001"
    }
    const receipt = await rpc(base, token, "Mutate", seedRequest)
    expect(receipt._tag, JSON.stringify(receipt)).toBe("Success")
    expect(await server.stop()).toBe(0)

    const plan = await run(["migrate", "plan", "--app", join(dir, "v2.ts")], env)
    expect(plan.code, plan.stderr).toBe(0)
    expect(plan.stdout).toContain(`migration "backfill-colour" will run`)

    const stops: Array<ReturnType<typeof inspect>> = []
    for (let round = 0; round < 3; round++) {
      server = await serve(join(dir, "v2.ts"), env)
      // The first request activates the database, which runs the pending batches; kill -9 meanwhile.
      const inflight = rpc(base, token, "Query", { query: { version: 1, from: { kind: "entity", name: "Note" }, select: { text: { path: ["text"] } } } }).catch(() => undefined)
      await new Promise((r) => setTimeout(r, 150 + Math.floor(random() * 700)))
      expect(await server.kill()).toBe(-9)
      await inflight
      const state = inspect(dataDir)
      stops.push(state)
      // A batch boundary: every committed batch is whole, recorded once, and nothing else moved.
      expect(state.coloured, JSON.stringify(state)).toBe(Math.min(NOTES, 5 * state.batches))
      expect(state.commits).toBe(state.batches)
      expect(state.applied.includes("backfill-colour")).toBe(state.done)
      if (state.done) break
    }
    console.log(`MigrationKillEndToEnd seed=${seed}: batches at each kill ${stops.map((s) => s.batches).join(", ")}`)

    // Whatever is left is applied eagerly, with the server stopped: progress, then a summary.
    const applied = await run(["migrate", "apply", "--app", join(dir, "v2.ts")], env)
    expect(applied.code, applied.stderr).toBe(0)
    expect(applied.stdout).toContain("[····················] 0/1 database ")
    expect(applied.stdout).toContain("[####################] 1/1")
    expect(applied.stdout).toMatch(/summary: 1 database: [01] updated, [01] unchanged, 0 refused, 0 failed; \d+ migration batch(es)? committed/)
    const batchLines = applied.stdout.split("\n").filter((l) => l.includes(`migration "backfill-colour": batch`))
    expect(batchLines.length).toBe(NOTES / 5 - stops[stops.length - 1]!.batches)
    if (batchLines.length > 0) expect(batchLines[batchLines.length - 1]).toContain("(finished)")

    server = await serve(join(dir, "v2.ts"), env)
    const rows = await rpc(base, token, "Query", { query: { version: 1, from: { kind: "entity", name: "Note" }, select: { colour: { path: ["colour"] } }, page: { first: 200 } } })
    expect(rows._tag, JSON.stringify(rows)).toBe("Success")
    expect(rows.value.rows).toHaveLength(NOTES)
    expect(rows.value.rows.every((r: { colour?: string }) => r.colour === "grey")).toBe(true)
    const replayed = await rpc(base, token, "Mutate", seedRequest)
    expect(replayed).toEqual(receipt)
    expect(await server.stop()).toBe(0)
    const final = inspect(dataDir)
    expect(final).toEqual({ coloured: NOTES, batches: NOTES / 5, done: true, commits: NOTES / 5, applied: ["backfill-colour"] })
  }, 240_000)
})

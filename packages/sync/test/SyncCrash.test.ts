// A sync client process SIGKILLed the moment a large batch arrives (so mid-apply) must
// restart with its records and cursor in step: the records are exactly the state of the
// log at the stored position, and it then catches up to the oracle.
import { spawn } from "node:child_process"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Logger, LogLevel } from "effect"
import { Log, Position } from "@cairn/store"
import { startServer, type SyncServer } from "./support/server.js"
import { database, idOf, run, tempDir, visibleTo, who } from "./support/tracker.js"

const repoRoot = join(import.meta.dirname, "..", "..", "..")
const fixture = join(import.meta.dirname, "fixtures", "syncChild.ts")
const admin = who("erin", { roles: ["admin"] })

interface Outcome {
  readonly lines: ReadonlyArray<string>
  readonly signal: string | null
  readonly stderr: string
}

/** Runs the child; with `killOnBatch`, SIGKILLs it as soon as it reports a non-empty batch. */
const runChild = (url: string, token: string, file: string, killOnBatch: boolean) =>
  Effect.async<Outcome>((resume) => {
    // node itself with the tsx loader, so SIGKILL reaches the process doing the work.
    const child = spawn(process.execPath, ["--import", "tsx", fixture, url, token, file], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk
      if (killOnBatch && /^batch [1-9]/m.test(out)) child.kill("SIGKILL")
    })
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk))
    child.on("exit", (_code, signal) => resume(Effect.succeed({ lines: out.split("\n").filter((l) => l !== ""), signal, stderr: err })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** What the client file holds: its stored position and records. */
const local = (file: string) => {
  const db = new Database(file, { readonly: true })
  try {
    const checkpoint = db.prepare(`SELECT position FROM sync_checkpoint`).get() as { position: string } | undefined
    const rows = db.prepare(`SELECT entity, id, record FROM sync_records`).all() as Array<{ entity: string; id: string; record: string }>
    return {
      position: checkpoint ? Position.decode(checkpoint.position)! : undefined,
      records: new Map(rows.map((r) => [`${r.entity}/${r.id}`, JSON.parse(r.record) as Record<string, unknown>]))
    }
  } finally {
    db.close()
  }
}

/** The admin's view of the database as of `position`: the log folded up to it. */
const stateAt = (server: SyncServer, position: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const db = yield* database()
      const commits = yield* Effect.orDie(Log.commitsAfter(db.reader, 0, position))
      const state = new Map<string, Record<string, unknown>>()
      for (const commit of commits) {
        for (const change of commit.changes) {
          if (change.after) state.set(`${change.entity}/${change.id}`, { ...change.after })
          else state.delete(`${change.entity}/${change.id}`)
        }
      }
      return state
    })
  ).pipe(Effect.provide(server.engine))

describe("client crash safety", () => {
  it.scopedLive("a client killed mid-apply restarts with records and cursor in step, then converges", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir)
      const token = yield* server.token("erin", { roles: ["admin"] })
      const file = join(dir, "client.sqlite")
      const onServer = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.scoped(Effect.provide(effect, server.engine)) as Effect.Effect<A, E>
      const project = idOf(yield* onServer(run(admin, "Project", "create", { name: "Bulk" })))

      const first = yield* runChild(server.url, token, file, false)
      assert.match(first.lines[first.lines.length - 1] ?? "", /^done c/, first.stderr)
      const base = local(file)
      assert.strictEqual(base.position, 1)

      let caughtMidApply = 0
      for (let attempt = 0; attempt < 4; attempt++) {
        // Each round adds one commit of 3000 new tasks: one large batch to apply.
        yield* onServer(run(admin, "Task", "createMany", { projectId: project, count: 3000, prefix: `r${attempt}` }))
        const killed = yield* runChild(server.url, token, file, true)
        assert.strictEqual(killed.signal, "SIGKILL", killed.stderr)
        const after = local(file)
        assert.isDefined(after.position)
        // All or nothing: the records are exactly the log's state at the stored position.
        assert.deepStrictEqual(after.records, yield* stateAt(server, after.position!))
        if (killed.lines.some((l) => /^batch [1-9]/.test(l)) && after.position! < attempt + 2) caughtMidApply += 1
      }
      // The kill landed between a batch's arrival and its commit at least once.
      assert.isAtLeast(caughtMidApply, 1)

      const last = yield* runChild(server.url, token, file, false)
      assert.match(last.lines[last.lines.length - 1] ?? "", /^done c/, last.stderr)
      const final = local(file)
      assert.strictEqual(final.position, 5)
      assert.strictEqual(final.records.size, 1 + 1 + 4 * 3000)
      assert.deepStrictEqual(final.records, yield* onServer(Effect.flatMap(database(), (db) => visibleTo(db, admin))))
    }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)))
})

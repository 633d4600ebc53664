// The operator CLI (`npm run cairn`, apps/server/src/cli.ts) run as a real process against
// the data directory of a real server: an online backup while it serves, a restore that
// refuses to touch the live file, a point-in-time restore once it is stopped (the
// restarted server serves exactly the data at that position), and another deployment's refusal.
import { spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { tracker } from "@cairn/client/generated/tracker"
import { Effect } from "effect"
import { startApp } from "./support/app.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))

/** Runs `cairn <args>` (node with the tsx loader, as `npm run cairn` does) over `dataDir`. */
const cairn = (dataDir: string, args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", "apps/server/src/cli.ts", ...args], {
      cwd: root,
      env: { ...process.env, CAIRN_DATA_DIR: dataDir },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    child.on("exit", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("cairn backup / restore", () => {
  it.scopedLive("backs up a serving deployment and restores one database to a position", () =>
    Effect.gen(function* () {
      const backups = mkdtempSync(join(tmpdir(), "cairn-backups-"))
      const first = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp()
          const alice = app.as(yield* app.token({ sub: "alice", org: "acme", roles: ["admin"] }))
          const create = (name: string) => alice(tracker.Project.create({ input: { name } }))
          yield* create("Apollo")
          yield* create("Gemini")
          const backup = yield* cairn(app.dataDir, ["backup", "--database", "acme", "--to", backups])
          assert.strictEqual(backup.code, 0, backup.stderr)
          assert.match(backup.stdout, /^backed up [0-9a-f]+ at position 2 to /m)
          // The server is using the file: restore will not replace it.
          const refused = yield* cairn(app.dataDir, ["restore", "--from", backups, "--database", "acme"])
          assert.strictEqual(refused.code, 1)
          assert.include(refused.stderr, "already exists")
          // Not even with --force: the running server holds the data directory's lock.
          const forced = yield* cairn(app.dataDir, ["restore", "--from", backups, "--database", "acme", "--force"])
          assert.strictEqual(forced.code, 1)
          assert.include(forced.stderr, "another Cairn process is using")
          const mercury = yield* create("Mercury")
          yield* create("Vostok")
          return { app, mercury }
        })
      )

      // Stopped: back to Mercury's position, past the backup (its commit replayed from the live file's log).
      const restored = yield* cairn(first.app.dataDir, ["restore", "--from", backups, "--database", "acme", "--to", first.mercury.position, "--force"])
      assert.strictEqual(restored.code, 0, restored.stderr)
      assert.include(restored.stdout, "to position 3 (backup at 2, 1 commits replayed)")
      assert.include(restored.stdout, "the previous file was kept as")

      const app = yield* startApp({ restartOf: first.app })
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme", roles: ["admin"] }))
      const names = yield* alice(tracker.Project.query({ select: { name: { path: ["name"] } }, order: [{ path: ["name"], direction: "asc" }] }))
      assert.deepStrictEqual(names.rows.map((r) => r.name), ["Apollo", "Gemini", "Mercury"])
      // The same invocation replays its stored receipt.
      const replay = yield* alice(tracker.Project.create({ input: { name: "Mercury" }, invocationId: first.mercury.invocationId }))
      assert.deepStrictEqual(replay, first.mercury)

      // Another data directory is another deployment.
      const other = yield* cairn(mkdtempSync(join(tmpdir(), "cairn-other-")), ["restore", "--from", backups, "--database", "acme"])
      assert.strictEqual(other.code, 1)
      assert.include(other.stderr, "belongs to deployment")
      const usage = yield* cairn(first.app.dataDir, ["backup", "--to", backups])
      assert.strictEqual(usage.code, 1)
      assert.include(usage.stderr, "pass exactly one of --database <key> and --all")
    }), 120_000)
})

// One tenant repaired while the rest serve: a storage fault found by a real server process is
// reported by `cairn doctor` (every database's integrity checked on a worker thread, each one's
// state listed) and cleared once the file is back, without a restart; `cairn restore` against the
// running server restores one database online (its calls answer a retryable 503 meanwhile) while
// another tenant keeps writing; and a restore names any app's database, namespaced ones included.
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { DatabaseKey } from "@cairn/domain/Ids"
import { databaseKeyOf } from "@cairn/server/engine/Deployment"
import { Backup } from "@cairn/store"
import { databaseId } from "@cairn/store/Databases"
import { rpc } from "@cairn/testkit/Wire"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { startApp } from "./support/app.js"
import { childToken, launchChild, stopChild } from "./support/child.js"
import { appDirectory, cairn, root } from "./support/cli.js"
import { createProject, projects } from "./support/requests.js"

const main = "apps/server/src/main.ts"
const fileOf = (dataDir: string, id: string) => join(dataDir, "databases", `${id}.sqlite`)
const tracker = (org: string) => databaseId(DatabaseKey.make(org))

const rows = (answer: { readonly status: number; readonly value?: unknown; readonly text: string }) => {
  assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
  return (answer.value as { rows: ReadonlyArray<Record<string, unknown>> }).rows
}
const committed = (answer: { readonly status: number; readonly value?: unknown; readonly text: string }) => {
  assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
  assert.strictEqual((answer.value as { outcome?: string }).outcome, "committed", answer.text.slice(0, 300))
}

/** Until the server has no database open (`cairn_databases_open` on its operator listener is 0). */
const closedAll = (dataDir: string) =>
  Effect.promise(async () => {
    // Written once the operator listener is up, which may be just after the public port.
    while (!existsSync(join(dataDir, "operator.json"))) await new Promise((resolve) => setTimeout(resolve, 50))
    const { url } = JSON.parse(readFileSync(join(dataDir, "operator.json"), "utf8")) as { url: string }
    for (;;) {
      const text = await (await fetch(`${url}/metrics`)).text()
      if (/^cairn_databases_open 0$/m.test(text)) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  })

let stop: Array<() => Promise<unknown>> = []
afterAll(async () => {
  for (const s of stop) await s()
})

describe("online per-tenant repair", () => {
  it.live("a fault is reported by cairn doctor and cleared without a restart; an online restore of one tenant while another writes", () =>
    Effect.gen(function* () {
      const dataDir = mkdtempSync(join(tmpdir(), "cairn-repair-"))
      // Databases close soon after their last call, so a file can be taken away between calls.
      const env = { CAIRN_METRICS_PORT: "0", CAIRN_SQLITE_SYNCHRONOUS: "NORMAL", CAIRN_DATABASE_IDLE_TIMEOUT: "200 millis" }
      const server = yield* Effect.promise(() => launchChild(main, dataDir, env))
      stop.push(() => stopChild(server))
      const acme = yield* Effect.promise(() => childToken(server, { sub: "alice", org: "acme" }))
      const globex = yield* Effect.promise(() => childToken(server, { sub: "gina", org: "globex" }))
      committed(yield* rpc(server, acme, "Mutate", createProject("Apollo", uuidv7())))
      committed(yield* rpc(server, globex, "Mutate", createProject("Gemini", uuidv7())))
      yield* closedAll(dataDir)

      // acme's file goes missing between calls: the server refuses acme and serves globex.
      const file = fileOf(dataDir, tracker("acme"))
      renameSync(file, `${file}.away`)
      assert.strictEqual((yield* rpc(server, acme, "Query", { query: projects })).status, 503)
      assert.strictEqual(rows(yield* rpc(server, globex, "Query", { query: projects })).length, 1)

      const operator = { CAIRN_DATA_DIR: dataDir }
      const report = yield* Effect.promise(() => cairn(["doctor"], operator))
      assert.strictEqual(report.code, 1, report.stderr + report.stdout)
      const line = (id: string) => report.stdout.split("\n").find((l) => l.startsWith(id)) ?? ""
      assert.include(line(tracker("acme")), "faulted", report.stdout)
      assert.include(line(tracker("acme")), "fault missing", report.stdout)
      assert.include(line(tracker("globex")), "integrity ok", report.stdout)
      assert.notInclude(line(tracker("globex")), "fault", report.stdout)

      // Put back, the fault cleared: acme serves again, with its data, on the same process.
      renameSync(`${file}.away`, file)
      const cleared = yield* Effect.promise(() => cairn(["doctor", "--clear-fault", "--database", "acme"], operator))
      assert.strictEqual(cleared.code, 0, cleared.stderr + cleared.stdout)
      assert.include(cleared.stdout, "fault (missing) cleared; it serves again")
      assert.deepStrictEqual(rows(yield* rpc(server, acme, "Query", { query: projects })).map((r) => r.name), ["Apollo"])

      // Backed up at one project; two more after it; restored online while globex keeps writing.
      const backups = mkdtempSync(join(tmpdir(), "cairn-repair-backups-"))
      yield* Backup.backupDatabase({ dataDir, deploymentId: yield* Backup.deploymentIdOf(dataDir), databaseId: tracker("acme"), to: backups })
      committed(yield* rpc(server, acme, "Mutate", createProject("Later 1", uuidv7())))
      committed(yield* rpc(server, acme, "Mutate", createProject("Later 2", uuidv7())))
      let writing = true
      const statuses: Array<number | string> = []
      const writer = yield* Effect.fork(
        Effect.whileLoop({
          while: () => writing,
          body: () => rpc(server, globex, "Mutate", createProject(`During ${statuses.length}`, uuidv7())),
          step: (answer) => statuses.push(answer.status === 200 ? (answer.value as { outcome: string }).outcome : answer.status)
        })
      )
      const restored = yield* Effect.promise(() => cairn(["restore", "--database", "acme", "--from", backups], operator))
      writing = false
      yield* writer.await
      assert.strictEqual(restored.code, 0, restored.stderr + restored.stdout)
      assert.include(restored.stdout, `restored ${tracker("acme")} online to position`)
      assert.deepStrictEqual(rows(yield* rpc(server, acme, "Query", { query: projects })).map((r) => r.name), ["Apollo"])
      assert.isAbove(statuses.length, 0)
      assert.deepStrictEqual([...new Set(statuses)], ["committed"], "globex was refused during acme's restore")
      committed(yield* rpc(server, acme, "Mutate", createProject("After", uuidv7())))
    }), 120_000)

  it.scoped("another app's namespaced database: restored online by its claims, found damaged by the live integrity check and restored again, and offline once stopped", () =>
    Effect.gen(function* () {
      const dir = appDirectory()
      const module = join(dir, "notes-app.ts")
      yield* Effect.sync(() =>
        writeFileSync(module, `export { notesDeployment as deployment } from ${JSON.stringify(join(root, "examples/notes/src/application.ts"))}\n`)
      )
      // The notes example, as `--app` loads it (not a dependency of the server app).
      const notesDeployment = (yield* Effect.promise(() => import(module) as Promise<{ deployment: DeploymentDefinition }>)).deployment
      const teams = notesDeployment.databases.find((d) => d.name === "teams")!
      const id = databaseId(databaseKeyOf(teams, "acme"))
      const dataDir = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp({ deployment: notesDeployment, env: { CAIRN_METRICS_PORT: "0" } })
          const token = yield* signDevToken(app.dev, {
            subject: "alice",
            audience: `${app.base}/db`,
            claims: { org: "acme", cairn_db: "teams" },
            scope: accessScopes.join(" "),
            ttlSeconds: 600
          })
          const create = (title: string) => ({ operation: { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "create" }, input: { title, body: "" }, invocationId: uuidv7() })
          const titles = { version: 1, from: { kind: "entity", name: "Note" }, select: { title: { path: ["title"] } } }
          committed(yield* rpc(app, token, "Mutate", create("Kept")))
          // The operator's actions: on the operator listener only, and only with the credential the server wrote.
          const credential = JSON.parse(readFileSync(join(app.dataDir, "operator.json"), "utf8")) as { url: string; token: string }
          const listing = (base: string, bearer?: string) =>
            Effect.promise(() => fetch(`${base}/admin/databases`, { headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` } }))
          assert.strictEqual((yield* listing(credential.url)).status, 401)
          assert.strictEqual((yield* listing(credential.url, `${credential.token.slice(1)}x`)).status, 401)
          assert.notStrictEqual((yield* listing(app.base, credential.token)).status, 200, "operator actions on the public port")
          const listed = yield* Effect.promise(() => listing(credential.url, credential.token).pipe(Effect.runPromise).then((r) => r.json()))
          const mine = (listed as { databases: Array<{ id: string; state: string; fileBytes: number; fault: unknown }> }).databases.find((d) => d.id === id)
          assert.deepInclude(mine, { id, state: "open", fault: null })
          assert.isAbove(mine!.fileBytes, 0)
          const operator = { CAIRN_DATA_DIR: app.dataDir }
          const backups = mkdtempSync(join(tmpdir(), "cairn-notes-backups-"))
          yield* Backup.backupDatabase({ dataDir: app.dataDir, deploymentId: yield* Backup.deploymentIdOf(app.dataDir), databaseId: id, to: backups })
          committed(yield* rpc(app, token, "Mutate", create("Undone")))
          const online = yield* Effect.promise(() => cairn(["restore", "--app", module, "--db", "teams", "--org", "acme", "--from", backups], operator))
          assert.strictEqual(online.code, 0, online.stderr)
          assert.include(online.stdout, `restored ${id} online`)
          assert.deepStrictEqual(rows(yield* rpc(app, token, "Query", { query: titles })).map((r) => r.title), ["Kept"])

          // Damaged under the running server: the integrity check (a worker thread) finds it and refuses the database;
          // an online restore brings it back, every other database serving throughout.
          const admin = (path: string, body: unknown) =>
            Effect.promise(() =>
              fetch(`${credential.url}${path}`, {
                method: "POST",
                headers: { authorization: `Bearer ${credential.token}`, "content-type": "application/json" },
                body: JSON.stringify(body)
              }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))
            )
          const file = fileOf(app.dataDir, id)
          const fd = openSync(file, "r+")
          writeSync(fd, Buffer.alloc(8192, 0xa5), 0, 8192, 8192)
          closeSync(fd)
          const checked = yield* admin("/admin/check", { id })
          assert.strictEqual(checked.status, 200, JSON.stringify(checked.body))
          assert.isFalse(checked.body.results[0].ok, JSON.stringify(checked.body))
          assert.isAbove(checked.body.results[0].problems.length, 0)
          assert.strictEqual((yield* rpc(app, token, "Query", { query: titles })).status, 503)
          const other = yield* signDevToken(app.dev, { subject: "bob", audience: `${app.base}/db`, claims: { cairn_db: "personal" }, scope: accessScopes.join(" "), ttlSeconds: 600 })
          committed(yield* rpc(app, other, "Mutate", create("Bob's")))
          const repaired = yield* admin("/admin/restore", { id, from: backups })
          assert.strictEqual(repaired.status, 200, JSON.stringify(repaired.body))
          assert.deepStrictEqual(rows(yield* rpc(app, token, "Query", { query: titles })).map((r) => r.title), ["Kept"])
          return { dataDir: app.dataDir, backups }
        })
      )
      // Stopped: the offline path compiles the app `--app` names (not the tracker).
      const offline = yield* Effect.promise(() =>
        cairn(["restore", "--app", module, "--db", "teams", "--database", "acme", "--from", dataDir.backups, "--force"], { CAIRN_DATA_DIR: dataDir.dataDir })
      )
      assert.strictEqual(offline.code, 0, offline.stderr)
      assert.include(offline.stdout, `restored ${id} to position`)
    }), 120_000)
})

// The number of databases a deployment may create is bounded (CAIRN_MAX_DATABASES): one more is
// refused with a clear retryable-later answer and nothing of it is created, while the existing ones
// keep serving, also after a restart (registered databases count).
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { rpc } from "@cairn/testkit/Wire"
import { startApp } from "./support/app.js"

const createProject = (name: string) => ({
  operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
  input: { name },
  invocationId: uuidv7()
})
const projects = { query: { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } }, page: { first: 10 } } }
const files = (dataDir: string) => readdirSync(join(dataDir, "databases")).filter((f) => f.endsWith(".sqlite")).length

describe("the database limit through the real App", () => {
  it.scopedLive("one database past CAIRN_MAX_DATABASES is refused, nothing created; the others keep serving", () =>
    Effect.gen(function* () {
      const { dataDir } = yield* Effect.scoped(
        Effect.gen(function* () {
          const app = yield* startApp({ env: { CAIRN_MAX_DATABASES: "2" } })
          for (const org of ["acme", "globex"]) {
            const token = yield* app.token({ sub: "alice", org })
            const created = yield* rpc(app, token, "Mutate", createProject(org))
            assert.strictEqual(created.value?.outcome, "committed", created.text)
          }
          const initech = yield* app.token({ sub: "alice", org: "initech" })
          for (const call of [rpc(app, initech, "Mutate", createProject("initech")), rpc(app, initech, "Query", projects)]) {
            const refused = yield* call
            assert.strictEqual(refused.status, 503, refused.text)
            assert.include(refused.text, "cannot create another database now")
            assert.include(refused.text, "nothing was stored")
            assert.notInclude(refused.text, "CAIRN_MAX_DATABASES")
            assert.notInclude(refused.text, app.dataDir)
          }
          assert.strictEqual(files(app.dataDir), 2)
          // The existing databases are untouched and keep committing.
          const acme = yield* app.token({ sub: "alice", org: "acme" })
          assert.strictEqual((yield* rpc(app, acme, "Mutate", createProject("more"))).value?.outcome, "committed")
          assert.deepStrictEqual((yield* rpc(app, acme, "Query", projects)).value.rows.map((r: { name: string }) => r.name).sort(), ["acme", "more"])
          return { dataDir: app.dataDir }
        })
      )
      // Registered databases count after a restart too.
      const same = yield* startApp({ dataDir, env: { CAIRN_MAX_DATABASES: "2" } })
      const initech = yield* same.token({ sub: "alice", org: "initech" })
      assert.strictEqual((yield* rpc(same, initech, "Mutate", createProject("initech"))).status, 503)
    })
  , 60_000)

  it.scopedLive("a limit of one: the first database is created, the second refused", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_MAX_DATABASES: "1" } })
      const initech = yield* app.token({ sub: "alice", org: "initech" })
      assert.strictEqual((yield* rpc(app, initech, "Mutate", createProject("initech"))).value?.outcome, "committed")
      const other = yield* app.token({ sub: "alice", org: "other" })
      assert.strictEqual((yield* rpc(app, other, "Mutate", createProject("other"))).status, 503)
      assert.strictEqual(files(app.dataDir), 1)
    })
  , 60_000)
})

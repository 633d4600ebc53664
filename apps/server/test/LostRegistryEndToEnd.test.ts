// A lost registry is not a fresh start. `npm start`'s entry as its own process: a fresh data
// directory starts; once used, emptying registry.sqlite together with the database files while
// it is stopped makes the next start exit non-zero with one operator message naming what to do,
// instead of answering the tenant as new (its old invocation id would be applied again). (The
// override and the other refusals: packages/store/test/DataDirectory.test.ts, in process.)
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { v7 as uuidv7 } from "uuid"
import { type Child, childToken, launchChild, stopChild } from "./support/child.js"
import { postCreateProject } from "./support/requests.js"

const entry = "apps/server/src/main.ts"

const createProject = (server: Child, bearer: string, invocationId: string) => postCreateProject(server.base, bearer, invocationId)

describe("a lost registry through a real server process", () => {
  it("refuses to start on a used directory whose registry and database files were emptied; a fresh one starts", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-lost-"))
    const servers: Array<Child> = []
    try {
      // A fresh directory starts and serves.
      const first = await launchChild(entry, dataDir)
      servers.push(first)
      const invocationId = uuidv7()
      const receipt = await createProject(first, await childToken(first, { sub: "alice", org: "acme" }), invocationId)
      expect(receipt.outcome).toBe("committed")
      // Killed: an acknowledged commit is durable, and so is the registry that knows its database.
      await stopChild(first)

      // Stopped: the registry emptied, the database files removed.
      writeFileSync(join(dataDir, "registry.sqlite"), "")
      for (const file of readdirSync(join(dataDir, "databases"))) rmSync(join(dataDir, "databases", file))

      const refused = await launchChild(entry, dataDir, {}, first).then(
        () => undefined,
        (error: Error) => error.message
      )
      expect(refused, "the server started").toBeDefined()
      expect(refused).toMatch(/exited early \(([1-9]\d*)\)/)
      expect(refused).toContain(`Cairn cannot start: the data directory ${dataDir} was used before`)
      expect(refused).toContain("Restore registry.sqlite and databases/ together from a backup")
      expect(refused).toContain("CAIRN_ACCEPT_LOST_REGISTRY=true")
      expect(refused).not.toContain("Cairn listening on")
      expect(refused).not.toMatch(/at .*\.ts:\d+/)

    } finally {
      for (const server of servers) await stopChild(server)
    }
  }, 90_000)
})

// `cairn backup` (a real process, as `npm run cairn` runs it) of a deployment whose files live in
// an S3 bucket (s3rver on 127.0.0.1): the backup holds the bucket's objects of the database, each
// under its sha256, beside the database file. (Restoring them through the store:
// ObjectsEndToEnd's backup test, on both backends.)
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Digest } from "@cairn/catalog"
import { filesDeployment } from "@cairn/testkit/fixture/files"
import { newInvocationId } from "@cairn/client/InvocationId"
import { rpc } from "@cairn/testkit/Wire"
import { Effect } from "effect"
import { startApp } from "./support/app.js"
import { cairn } from "./support/cli.js"
import { s3 } from "./support/objectBackends.js"

describe("cairn backup with an S3 object store", () => {
  it.scopedLive("copies the database's objects from the bucket into the backup", () =>
    Effect.gen(function* () {
      const backend = yield* s3
      const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      // The database file exists once something is committed.
      const project = yield* rpc(app, alice, "Mutate", {
        operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
        input: { name: "Backed up" },
        invocationId: newInvocationId()
      })
      assert.isDefined(project.value, project.text)
      const bytes = Buffer.from("only in the bucket")
      const uploaded = yield* Effect.promise(async () => {
        const response = await fetch(`${app.base}/db/objects`, {
          method: "POST",
          headers: { authorization: `Bearer ${alice}`, "content-type": "text/plain" },
          body: bytes
        })
        return (await response.json()) as { sha256: string }
      })
      const databaseId = Digest.databaseId("\u0000orgs\u0000acme")
      // Nothing of it is on the local disk: only the store can give it to the backup.
      assert.isFalse(existsSync(join(app.dataDir, "objects", databaseId, uploaded.sha256)))
      assert.isTrue(yield* backend.exists(app.dataDir, databaseId, uploaded.sha256))

      const backups = mkdtempSync(join(tmpdir(), "cairn-s3-backups-"))
      const ran = yield* Effect.promise(() => cairn(["backup", "--all", "--to", backups], { ...backend.env, CAIRN_DATA_DIR: app.dataDir }))
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.deepStrictEqual(readFileSync(join(backups, "objects", databaseId, uploaded.sha256)), bytes)
    }),
    60_000
  )
})

// A write on a full disk, for real: the server's data directory is a small tmpfs mounted by
// the test (it runs as root, as CI does), filled to the last page. A mutation then answers a
// retryable 503 with Retry-After on RPC, MCP and files, never an internal error; nothing of it is
// stored or acknowledged; once space is freed, the same request (same invocationId) commits once.
import { execFileSync } from "node:child_process"
import { appendFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { startApp } from "./support/app.js"
import { createProject, projects } from "./support/requests.js"

const isRoot = process.getuid?.() === 0

/** A tmpfs of `megabytes` for the scope (lazily unmounted after the server has stopped). */
const smallDisk = (megabytes: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "cairn-full-"))
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${megabytes}m`, "tmpfs", dir])
      return dir
    }),
    (dir) =>
      Effect.sync(() => {
        execFileSync("umount", ["-l", dir])
        rmSync(dir, { recursive: true, force: true })
      })
  )

/** Fills the file system of `dir` to its last byte with one file, returned for freeing later. */
const fill = (dir: string) => {
  const filler = join(dir, "filler")
  for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 9, 1]) {
    const chunk = Buffer.alloc(size)
    for (;;) {
      try {
        appendFileSync(filler, chunk)
      } catch (error) {
        if ((error as { code?: string }).code !== "ENOSPC") throw error
        break
      }
    }
  }
  return filler
}

const post = (url: string, token: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${token}`, ...headers },
      body: JSON.stringify(body)
    })
    return { status: response.status, retryAfter: response.headers.get("retry-after"), text: await response.text() }
  })

const invocationId = (n: number) => `01a20000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`

describe("a full disk", () => {
  it.scopedLive.runIf(isRoot)("answers writes with a retryable 503 + Retry-After on RPC, MCP and files, acknowledges nothing, and commits the same request once space is back", () =>
    Effect.gen(function* () {
      const dir = yield* smallDisk(24)
      const app = yield* startApp({ dataDir: dir })
      const token = yield* app.token({ sub: "root", org: "acme", roles: ["admin"] })
      const agent = yield* app.token({ sub: "root", org: "acme", roles: ["admin"], resource: "mcp" })
      const rpc = (tag: string, payload: unknown) => post(`${app.base}/db/rpc`, token, { _tag: "Request", id: "1", tag, payload, headers: [] })
      const names = Effect.map(rpc("Query", { query: projects }), (answer) =>
        (JSON.parse(answer.text)[0].exit.value.rows as ReadonlyArray<{ name: string }>).map((row) => row.name).sort()
      )
      assert.strictEqual((yield* rpc("Mutate", createProject("before", invocationId(1)))).status, 200)

      const filler = fill(dir)
      // Writes until one finds no room (a write may still fit in space SQLite already holds).
      let refused: { readonly status: number; readonly retryAfter: string | null; readonly text: string } | undefined
      let n = 2
      for (; n < 40 && refused === undefined; n++) {
        const answer = yield* rpc("Mutate", createProject(`p${n}`, invocationId(n)))
        assert.include([200, 503], answer.status, answer.text)
        assert.notInclude(answer.text, '"Die"', "a write on a full disk is not a defect")
        if (answer.status === 503) refused = answer
      }
      const refusedId = n - 1
      assert.isDefined(refused, "no write was refused on a full disk")
      assert.strictEqual(refused!.retryAfter, "30")
      const body = JSON.parse(refused!.text)
      assert.strictEqual(body.error, "unavailable")
      assert.strictEqual(body.retryAfterSeconds, 30)
      assert.include(body.message, "storage is full")
      for (const internal of ["SQLITE", "ENOSPC", dir, "Error", "internal_error"]) assert.notInclude(refused!.text, internal)

      // MCP: the same answer in MCP's HTTP layer.
      const viaMcp = yield* post(
        `${app.base}/mcp`,
        agent,
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "mutate", arguments: createProject("agent", invocationId(100)) } },
        { "mcp-protocol-version": "2025-11-25" }
      )
      assert.strictEqual(viaMcp.status, 503, viaMcp.text)
      assert.strictEqual(viaMcp.retryAfter, "30")
      assert.include(viaMcp.text, "storage is full")

      // Files: an upload finds no room either, and is told when to come back.
      const upload = yield* Effect.promise(async () => {
        const response = await fetch(`${app.base}/db/objects`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
          body: "x".repeat(64 * 1024)
        })
        return { status: response.status, retryAfter: response.headers.get("retry-after"), text: await response.text() }
      })
      assert.strictEqual(upload.status, 503, upload.text)
      assert.isNotNull(upload.retryAfter)
      assert.strictEqual(JSON.parse(upload.text).error, "unavailable", upload.text)
      for (const internal of ["ENOSPC", dir]) assert.notInclude(upload.text, internal)

      // Nothing of the refused writes is there; reads still answer.
      const before = yield* names
      assert.notInclude(before, `p${refusedId}`)
      assert.notInclude(before, "agent")

      // Space back: the same request, with the same invocationId, commits once; a replay returns its receipt.
      rmSync(filler)
      const retried = yield* rpc("Mutate", createProject(`p${refusedId}`, invocationId(refusedId)))
      assert.strictEqual(retried.status, 200, retried.text)
      const receipt = JSON.parse(retried.text)[0].exit.value
      assert.strictEqual(receipt.outcome, "committed")
      const replayed = yield* rpc("Mutate", createProject(`p${refusedId}`, invocationId(refusedId)))
      assert.deepStrictEqual(JSON.parse(replayed.text)[0].exit.value, receipt)
      const after = yield* names
      assert.strictEqual(after.filter((name) => name === `p${refusedId}`).length, 1)
      assert.strictEqual(after.length, before.length + 1)
    }), 60_000)
})

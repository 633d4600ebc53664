// Resumable uploads refused when they finish, against a real server process (the `files`
// fixture): for each kind of refusal at the last PATCH — a content type no longer accepted, the
// quota, the object size, a storage fault — 50 times over, the process stays up, `/health`
// answers after every one, no descriptor stays open on a deleted file, and the upload folders
// hold nothing once the collector has run. Partial uploads of a database nobody touches after a
// restart expire too. An error that escapes every handler is logged and counted, not fatal.
//
// The uploads are made under generous settings, then the server is restarted under narrower
// ones (as an operator tightening limits would), so each upload is refused at its finish.
import { existsSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Digest } from "@cairn/catalog"
import { describe, expect, it } from "@effect/vitest"
import { type Child, childToken, launchChild, stopChild } from "./support/child.js"

const entry = "apps/server/test/support/filesServer.ts"
const tus = { "tus-resumable": "1.0.0" }
const b64 = (s: string) => Buffer.from(s).toString("base64")
const databaseIdOf = (org: string) => Digest.databaseId(`\u0000orgs\u0000${org}`)

const create = async (server: Child, token: string, size: number, type: string) => {
  const response = await fetch(`${server.base}/db/objects/resumable`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, ...tus, "upload-length": String(size), "upload-metadata": `filename ${b64("f.bin")},filetype ${b64(type)}` }
  })
  const text = await response.text()
  expect(response.status, text).toBe(201)
  return response.headers.get("location")!
}

const patch = async (server: Child, token: string, location: string, offset: number, bytes: Buffer) => {
  const response = await fetch(`${server.base}${location}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${token}`, ...tus, "upload-offset": String(offset), "content-type": "application/offset+octet-stream" },
    body: bytes as unknown as BodyInit
  })
  return { status: response.status, text: await response.text() }
}

const healthy = async (server: Child) => {
  const response = await fetch(`${server.base}/health`)
  expect(response.status).toBe(200)
  expect(await response.json()).toEqual({ status: "ok" })
}

/** The server's open descriptors that point at deleted files or into the upload folders. */
const leakedDescriptors = (server: Child) => {
  const dir = `/proc/${server.child.pid}/fd`
  const leaked: Array<string> = []
  for (const fd of readdirSync(dir)) {
    let target: string
    try {
      target = readlinkSync(join(dir, fd))
    } catch {
      continue
    }
    if (target.endsWith("(deleted)") || target.includes(join(server.dataDir, "uploads"))) leaked.push(target)
  }
  return leaked
}

const filesUnder = (dir: string): Array<string> =>
  existsSync(dir) ? readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)])) : []

const waitFor = async (what: string, check: () => boolean, ms = 20_000) => {
  const until = Date.now() + ms
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const groups = [
  { org: "refused-type", size: 100, type: "text/plain", status: 415, says: /not accepted/ },
  { org: "refused-quota", size: 3000, type: "image/png", status: 413, says: /quota of 2500 bytes/ },
  { org: "refused-size", size: 4000, type: "image/png", status: 413, says: /larger than the limit of 3500 bytes/ },
  // 50 × 40 bytes promised: within the narrower quota, so the store itself refuses.
  { org: "refused-fault", size: 40, type: "image/png", status: 503, says: /unavailable/ }
] as const
const perGroup = 50

describe("resumable uploads refused at their finish, against a separate server process", () => {
  it("every refusal is answered, the process stays up, nothing is left open or on disk; idle databases' partials expire; escaped errors are counted", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-resumable-refusals-"))
    const started: Array<Child> = []
    const bounds = { CAIRN_OBJECT_UNFINISHED_PER_PRINCIPAL: "100", CAIRN_OBJECT_UNFINISHED_PER_DATABASE: "100" }
    try {
      // 1. Under generous limits: 50 uploads per group, all but their last byte sent.
      const generous = await launchChild(entry, dataDir, bounds)
      started.push(generous)
      const pending: Record<string, Array<{ location: string; size: number }>> = {}
      for (const group of groups) {
        const token = await childToken(generous, { sub: "alice", org: group.org })
        pending[group.org] = []
        for (let i = 0; i < perGroup; i++) {
          const location = await create(generous, token, group.size, group.type)
          const sent = await patch(generous, token, location, 0, Buffer.alloc(group.size - 1, i))
          expect(sent.status, sent.text).toBe(204)
          pending[group.org]!.push({ location, size: group.size })
        }
      }
      // A database nobody touches after the restart, with one unfinished upload.
      const idleToken = await childToken(generous, { sub: "alice", org: "idle" })
      const idleUpload = await create(generous, idleToken, 100, "image/png")
      expect((await patch(generous, idleToken, idleUpload, 0, Buffer.alloc(10))).status).toBe(204)
      await stopChild(generous, "SIGTERM")

      // 2. Restarted under narrower limits, with the fault group's object area unable to take a file
      // (its staging folder is a file): the bytes cannot be stored when the upload finishes.
      const faultArea = join(dataDir, "objects", databaseIdOf("refused-fault"))
      mkdirSync(faultArea, { recursive: true })
      rmSync(join(faultArea, ".staging"), { recursive: true, force: true })
      writeFileSync(join(faultArea, ".staging"), "not a folder")
      const narrow = await launchChild(
        entry,
        dataDir,
        {
          ...bounds,
          CAIRN_OBJECT_CONTENT_TYPES: "image/*",
          CAIRN_OBJECT_MAX_BYTES: "3500",
          CAIRN_OBJECT_QUOTA_BYTES: "2500",
          CAIRN_OBJECT_COLLECT_EVERY: "500 millis",
          CAIRN_TEST_HOOKS: "1"
        },
        generous
      )
      started.push(narrow)
      for (const group of groups) {
        const token = await childToken(narrow, { sub: "alice", org: group.org })
        for (const [i, upload] of pending[group.org]!.entries()) {
          const finished = await patch(narrow, token, upload.location, upload.size - 1, Buffer.alloc(1, i))
          expect(finished.status, `${group.org} #${i}: ${finished.text}`).toBe(group.status)
          expect(finished.text).toMatch(group.says)
          // A quota refusal names the limit, never how many bytes are free.
          expect(finished.text).not.toMatch(/free/)
          await healthy(narrow)
        }
        expect(narrow.child.exitCode).toBeNull()
      }
      expect(leakedDescriptors(narrow)).toEqual([])
      // The refused uploads are gone (each refusal removed its partial); the collector removes their emptied folders.
      const uploads = join(dataDir, "uploads")
      await waitFor("the collector to empty the refused databases' upload folders", () =>
        groups.every((group) => !existsSync(join(uploads, databaseIdOf(group.org))))
      )
      expect(filesUnder(uploads).map((f) => f.slice(uploads.length))).toHaveLength(2) // the idle database's upload: bytes and record

      // 3. An error event nobody listens to is logged and counted as a defect; the process keeps serving.
      const fired = await fetch(`${narrow.base}/__test/escape`, { method: "POST" })
      expect(fired.status).toBe(202)
      await waitFor("the escaped error to be logged", () => narrow.output().includes("An error escaped its handler"))
      await healthy(narrow)
      const metrics = (await (await fetch(`${narrow.base}/__test/metrics`)).json()) as { metrics: Array<{ name: string; count: number }> }
      expect(metrics.metrics.find((m) => m.name === "cairn_escaped_errors_total")?.count).toBe(1)
      expect(narrow.child.exitCode).toBeNull()
      await stopChild(narrow, "SIGTERM")

      // 4. Restarted with a short upload lifetime: the idle database's partial expires without anyone touching it.
      const expiring = await launchChild(entry, dataDir, { CAIRN_OBJECT_UPLOAD_TTL: "1 second", CAIRN_OBJECT_COLLECT_EVERY: "300 millis" }, narrow)
      started.push(expiring)
      await waitFor("the idle database's partial upload to expire", () => filesUnder(uploads).length === 0)
      await healthy(expiring)
    } finally {
      for (const child of started) await stopChild(child)
    }
  })
})

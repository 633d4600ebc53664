// Object storage across SIGKILL of a real server process (the `files` fixture): an
// acknowledged upload survives and attaches after a restart; killing the server while
// attachments commit leaves every acknowledged one, and every record that references an
// object, with its bytes; collection afterwards removes only what nothing references, and
// the partial file of an upload cut off by the kill.
import { createHash } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Digest } from "@cairn/catalog"
import { newInvocationId } from "@cairn/client/InvocationId"
import { describe, expect, it } from "@effect/vitest"
import { type Child, childToken, launchChild, stopChild } from "./support/child.js"

const entry = "apps/server/test/support/filesServer.ts"

const op = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })

const call = async (server: Child, token: string, tag: "Mutate" | "Query", payload: unknown) => {
  const response = await fetch(`${server.base}/db/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", connection: "close" },
    body: JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })
  })
  const text = await response.text()
  if (response.status !== 200) return { ok: false as const, text }
  const exit = (JSON.parse(text) as Array<any>).find((m) => m._tag === "Exit")?.exit
  return exit?._tag === "Success" ? { ok: true as const, value: exit.value, text } : { ok: false as const, text }
}

const upload = async (server: Child, token: string, bytes: Buffer) => {
  const response = await fetch(`${server.base}/db/objects`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream", connection: "close" },
    body: bytes as unknown as BodyInit
  })
  const text = await response.text()
  expect(response.status, text).toBe(201)
  return JSON.parse(text) as { handle: string; sha256: string; objectId: string }
}

const attachments = async (server: Child, token: string) => {
  const answer = await call(server, token, "Query", {
    query: { version: 1, from: { kind: "entity", name: "Attachment" }, select: { id: { path: ["id"] }, file: { path: ["file"] } }, page: { first: 100 } }
  })
  expect(answer.ok, answer.text).toBe(true)
  return (answer as { value: any }).value.rows as Array<{ id: string; file: { url: string; sha256: string } }>
}

const fetchBytes = async (server: Child, token: string, path: string) => {
  const response = await fetch(`${server.base}${path}`, { headers: { authorization: `Bearer ${token}` } })
  return { status: response.status, sha256: createHash("sha256").update(Buffer.from(await response.arrayBuffer())).digest("hex") }
}

describe("object storage under SIGKILL", () => {
  it("no acknowledged upload or attachment is lost, no record references missing bytes, and collection spares referenced objects", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-objects-crash-"))
    const started: Array<Child> = []
    const blob = (sha256: string) => join(dataDir, "objects", Digest.databaseId("\u0000orgs\u0000acme"), sha256)
    const staging = join(dataDir, "objects", Digest.databaseId("\u0000orgs\u0000acme"), ".staging")
    try {
      // 1. Acknowledged upload, then SIGKILL before it is attached.
      const first = await launchChild(entry, dataDir)
      started.push(first)
      let alice = await childToken(first, { sub: "alice", org: "acme" })
      const project = await call(first, alice, "Mutate", { operation: op("Project", "create"), input: { name: "Crash" }, invocationId: newInvocationId() })
      expect(project.ok, project.text).toBe(true)
      const projectId = (project as { value: any }).value.output.id as string
      const early = await upload(first, alice, Buffer.from("uploaded before the crash"))
      await stopChild(first)

      // 2. After a restart the handle still attaches: the bytes were durable when it was answered.
      const second = await launchChild(entry, dataDir, {}, first)
      started.push(second)
      alice = await childToken(second, { sub: "alice", org: "acme" })
      const attached = await call(second, alice, "Mutate", {
        operation: op("Attachment", "add"),
        input: { projectId, file: early.handle },
        invocationId: newInvocationId()
      })
      expect(attached.ok, attached.text).toBe(true)

      // 3. SIGKILL while attachments commit.
      const files = Array.from({ length: 24 }, (_, i) => Buffer.from(`file number ${i} `.repeat(100 + i)))
      const uploads = await Promise.all(files.map((bytes) => upload(second, alice, bytes)))
      const intents = uploads.map((u) => ({ operation: op("Attachment", "add"), input: { projectId, file: u.handle }, invocationId: newInvocationId() }))
      const acknowledged: Array<{ intent: (typeof intents)[number]; receipt: unknown; sha256: string }> = []
      const inFlight = intents.map((intent, i) =>
        call(second, alice, "Mutate", intent)
          .then((answer) => {
            if (answer.ok) acknowledged.push({ intent, receipt: answer.value, sha256: uploads[i]!.sha256 })
          })
          .catch(() => undefined)
      )
      // And an upload still streaming: its bytes are in a partial file when the process dies.
      const stalled = new AbortController()
      let firstChunkSent = false
      void fetch(`${second.base}/db/objects`, {
        method: "POST",
        headers: { authorization: `Bearer ${alice}`, "content-type": "application/octet-stream" },
        body: new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (firstChunkSent) return new Promise<void>(() => undefined)
            firstChunkSent = true
            controller.enqueue(new Uint8Array(1024 * 1024))
          }
        }),
        duplex: "half",
        signal: stalled.signal
      } as RequestInit).catch(() => undefined)
      const partials = () => (existsSync(staging) ? readdirSync(staging) : [])
      while (acknowledged.length < 3 || partials().length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      second.child.kill("SIGKILL")
      stalled.abort()
      await Promise.all(inFlight)
      expect((await second.exited).signal).toBe("SIGKILL")

      // 4. Restarted: every acknowledged receipt replays, every record's file downloads whole.
      const third = await launchChild(entry, dataDir, {}, first)
      started.push(third)
      alice = await childToken(third, { sub: "alice", org: "acme" })
      for (const { intent, receipt } of acknowledged) {
        const replay = await call(third, alice, "Mutate", intent)
        expect(replay.ok, replay.text).toBe(true)
        expect((replay as { value: unknown }).value).toEqual(receipt)
      }
      const rows = await attachments(third, alice)
      expect(rows.length).toBeGreaterThanOrEqual(1 + acknowledged.length)
      for (const row of rows) {
        const got = await fetchBytes(third, alice, row.file.url)
        expect(got).toEqual({ status: 200, sha256: row.file.sha256 })
      }
      const referenced = new Set(rows.map((r) => r.file.sha256))
      for (const { sha256 } of acknowledged) expect(referenced.has(sha256)).toBe(true)
      await stopChild(third, "SIGTERM")

      // 5. Collection after a restart (retention 0): unreferenced uploads go, referenced stay.
      const fourth = await launchChild(
        entry,
        dataDir,
        { CAIRN_OBJECT_RETENTION: "0 millis", CAIRN_OBJECT_UPLOAD_TTL: "1 second", CAIRN_OBJECT_COLLECT_EVERY: "200 millis" },
        first
      )
      started.push(fourth)
      const unreferenced = uploads.filter((u) => !referenced.has(u.sha256)).map((u) => blob(u.sha256))
      expect(partials().length).toBeGreaterThan(0)
      while (unreferenced.some(existsSync) || partials().length > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      for (const sha256 of referenced) expect(existsSync(blob(sha256))).toBe(true)
      alice = await childToken(fourth, { sub: "alice", org: "acme" })
      for (const row of await attachments(fourth, alice)) expect((await fetchBytes(fourth, alice, row.file.url)).status).toBe(200)
    } finally {
      for (const server of started) await stopChild(server)
    }
  }, 120_000)
})

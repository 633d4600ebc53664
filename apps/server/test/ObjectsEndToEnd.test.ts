// Object storage end to end, through the server exactly as `npm start` assembles it
// (the `files` fixture: projects, members, attachments with a `File` field):
// - upload → attach in an operation → query (metadata + url) → download, Range, ETag;
// - another org's file, a hidden record's file and a nonexistent file answer alike;
// - removing a membership revokes downloads and signed links at once;
// - size, content-type and quota limits; handles are single-database;
// - replaced, deleted and never-attached objects are collected; kept ones are not.
import { createHash } from "node:crypto"
import { request as httpRequest } from "node:http"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Digest } from "@cairn/catalog"
import { filesDeployment } from "@cairn/testkit/fixture/files"
import { mcp, rpc, sync } from "@cairn/testkit/Wire"
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs"
import { compile } from "@cairn/catalog/Catalog"
import { generate } from "../src/BindingsGenerator.js"
import { files } from "./support/filesBindings.js"
import { tmpdir } from "node:os"
import { Deployment } from "@cairn/server/engine/Deployment"
import { Backup, Restore } from "@cairn/store"
import * as ObjectStore from "@cairn/store/ObjectStore"
import { Effect, type Scope } from "effect"
import { type Backend, filesystem, s3 } from "./support/objectBackends.js"
import { newInvocationId } from "@cairn/client/InvocationId"
import { type Running, startApp } from "./support/app.js"

const op = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })

interface Http {
  readonly status: number
  readonly headers: Headers
  readonly body: Buffer
  readonly text: string
  readonly json: any
}

const http = (url: string, init: RequestInit = {}) =>
  Effect.promise(async (): Promise<Http> => {
    const response = await fetch(url, init)
    const body = Buffer.from(await response.arrayBuffer())
    const text = body.toString("utf8")
    let json: any
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.status, headers: response.headers, body, text, json }
  })

const upload = (app: Running, token: string, bytes: Uint8Array, options: { type?: string; name?: string } = {}) =>
  http(`${app.base}/db/objects`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": options.type ?? "text/plain",
      ...(options.name !== undefined ? { "x-file-name": encodeURIComponent(options.name) } : {})
    },
    body: bytes as unknown as BodyInit
  })

const download = (app: Running, token: string | undefined, path: string, headers: Record<string, string> = {}) =>
  http(`${app.base}${path}`, { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } })

const mutate = (app: Running, token: string, entity: string, name: string, input: unknown, target?: string) =>
  rpc(app, token, "Mutate", {
    operation: op(entity, name),
    ...(target ? { target: { kind: "entity", entity, id: target } } : {}),
    input,
    invocationId: newInvocationId()
  })

const created = (app: Running, token: string, entity: string, name: string, input: unknown) =>
  Effect.map(mutate(app, token, entity, name, input), (answer) => {
    assert.strictEqual(answer.status, 200, answer.text)
    assert.isDefined(answer.value, answer.text)
    return answer.value.output.id as string
  })

const attachments = (app: Running, token: string) =>
  Effect.map(
    rpc(app, token, "Query", {
      query: { version: 1, from: { kind: "entity", name: "Attachment" }, select: { id: { path: ["id"] }, file: { path: ["file"] } }, page: { first: 50 } }
    }),
    (answer) => {
      assert.isDefined(answer.value, answer.text)
      return answer.value.rows as Array<{ id: string; file: any }>
    }
  )

/** The refusal without the one thing that must differ per request: its correlation id. */
const comparable = (answer: Http) => ({
  status: answer.status,
  body: answer.text.replace(/"requestId":"[^"]*"/, ""),
  type: answer.headers.get("content-type"),
  etag: answer.headers.get("etag"),
  disposition: answer.headers.get("content-disposition")
})


/** The count of a counter metric with these tags, from the test hook. */
const counter = (app: Running, name: string, tags: Record<string, string>) =>
  Effect.promise(async () => {
    const { metrics } = (await (await fetch(`${app.base}/__test/metrics`)).json()) as {
      metrics: ReadonlyArray<{ name: string; tags: Record<string, string>; count: number }>
    }
    return metrics
      .filter((m) => m.name === name && Object.entries(tags).every(([k, v]) => m.tags[k] === v))
      .reduce((n, m) => n + m.count, 0)
  })

const acme = Digest.databaseId("\u0000orgs\u0000acme")

const backends: ReadonlyArray<readonly [string, Effect.Effect<Backend, never, Scope.Scope>]> = [
  ["filesystem", Effect.succeed(filesystem)],
  ["s3 via s3rver", s3]
]

for (const [name, acquire] of backends) {
describe(`object storage (${name})`, () => {
  it.scopedLive("upload, attach, query, download: metadata in the record, bytes on request, Range and ETag", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const project = yield* created(app, alice, "Project", "create", { name: "Launch" })

      const bytes = Buffer.from("Hello, stored world! 0123456789")
      const name = 'plan "final"; ünïcode %41 (1).txt'
      const uploaded = yield* upload(app, alice, bytes, { name, type: "text/plain; charset=utf-8" })
      assert.strictEqual(uploaded.status, 201, uploaded.text)
      const { handle, sha256, size, objectId } = uploaded.json
      assert.strictEqual(size, bytes.length)
      assert.strictEqual(sha256, createHash("sha256").update(bytes).digest("hex"))
      assert.isTrue(yield* backend.exists(app.dataDir, acme, sha256))

      const attachmentId = yield* created(app, alice, "Attachment", "add", { projectId: project, file: handle, caption: "plan" })
      const [row] = yield* attachments(app, alice)
      assert.strictEqual(row!.id, attachmentId)
      assert.deepStrictEqual(row!.file, {
        objectId,
        sha256,
        size: bytes.length,
        contentType: "text/plain",
        name,
        url: `/db/objects/${objectId}`
      })

      // The metadata travels with sync too.
      const snapshot = yield* sync(app, alice, "SyncSnapshot", { scope: { entities: [{ from: { kind: "entity", name: "Attachment" } }] } })
      assert.include(snapshot.text, sha256)

      // describe shows the file field.
      const described = yield* rpc(app, alice, "Describe", { inspect: [{ kind: "entity", name: "Attachment" }] })
      assert.include(described.text, "sha256")

      const got = yield* download(app, alice, row!.file.url)
      assert.strictEqual(got.status, 200)
      assert.isTrue(got.body.equals(bytes))
      assert.strictEqual(got.headers.get("etag"), `"${sha256}"`)
      assert.strictEqual(got.headers.get("x-content-type-options"), "nosniff")
      assert.strictEqual(got.headers.get("content-type"), "text/plain")
      const disposition = got.headers.get("content-disposition")!
      // The ASCII fallback holds no quote, backslash or non-ASCII character; the exact name is RFC 8187-encoded.
      assert.match(disposition, /^attachment; filename="[\x20\x21\x23-\x5b\x5d-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9%!._~-]+$/)
      assert.strictEqual(decodeURIComponent(disposition.split("UTF-8''")[1]!), name)

      const ranged = yield* download(app, alice, row!.file.url, { range: "bytes=7-12" })
      assert.strictEqual(ranged.status, 206)
      assert.strictEqual(ranged.text, "stored")
      assert.strictEqual(ranged.headers.get("content-range"), `bytes 7-12/${bytes.length}`)
      const suffix = yield* download(app, alice, row!.file.url, { range: "bytes=-4" })
      assert.strictEqual(suffix.text, "6789")
      const outside = yield* download(app, alice, row!.file.url, { range: `bytes=${bytes.length}-` })
      assert.strictEqual(outside.status, 416)
      // It says how long the file is, so the client can ask for a range that exists.
      assert.strictEqual(outside.headers.get("content-range"), `bytes */${bytes.length}`)
      const cached = yield* download(app, alice, row!.file.url, { "if-none-match": `"${sha256}"` })
      assert.strictEqual(cached.status, 304)

      // Content-addressed within the database: the same bytes again are stored once, under a new object id.
      const again = yield* upload(app, alice, bytes)
      assert.strictEqual(again.json.sha256, sha256)
      assert.notStrictEqual(again.json.objectId, objectId)

      // No token, no file.
      const anonymous = yield* download(app, undefined, row!.file.url)
      assert.strictEqual(anonymous.status, 401)
    })
  )

  it.scopedLive("another org's file, a hidden record's file and a nonexistent file answer alike; revocation is immediate", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const admin = yield* app.token({ sub: "root", org: "acme", roles: ["admin"] })
      const carol = yield* app.token({ sub: "carol", org: "acme" })
      const dave = yield* app.token({ sub: "dave", org: "acme" })
      const bob = yield* app.token({ sub: "bob", org: "globex", roles: ["admin"] })

      const project = yield* created(app, alice, "Project", "create", { name: "Secret" })
      const uploaded = yield* upload(app, alice, Buffer.from("top secret"))
      yield* created(app, alice, "Attachment", "add", { projectId: project, file: uploaded.json.handle })
      const url = `/db/objects/${uploaded.json.objectId}`

      // Bob's org holds the same bytes in its own record: still not alice's object id.
      const bobProject = yield* created(app, bob, "Project", "create", { name: "Other" })
      const bobUpload = yield* upload(app, bob, Buffer.from("top secret"))
      yield* created(app, bob, "Attachment", "add", { projectId: bobProject, file: bobUpload.json.handle })

      const notFoundBefore = yield* counter(app, "cairn_object_downloads_total", { outcome: "not_found" })
      const otherOrg = yield* download(app, bob, url)
      const hidden = yield* download(app, carol, url)
      const missing = yield* download(app, carol, `/db/objects/${"0".repeat(8)}-0000-4000-8000-${"0".repeat(12)}`)
      const garbage = yield* download(app, carol, `/db/objects/..%2F..%2Fregistry.sqlite`)
      assert.strictEqual(otherOrg.status, 404)
      assert.deepStrictEqual(comparable(hidden), comparable(otherOrg))
      assert.deepStrictEqual(comparable(missing), comparable(otherOrg))
      assert.deepStrictEqual(comparable(garbage), comparable(otherOrg))
      assert.strictEqual((yield* counter(app, "cairn_object_downloads_total", { outcome: "not_found" })) - notFoundBefore, 4)
      // A file in a field hidden from the caller answers the same, though the record is visible.
      const secret = yield* upload(app, admin, Buffer.from("admins only"))
      const withSecret = yield* upload(app, admin, Buffer.from("everyone in the project"))
      yield* created(app, admin, "Attachment", "add", { projectId: project, file: withSecret.json.handle, secret: secret.json.handle })
      const hiddenField = yield* download(app, alice, `/db/objects/${secret.json.objectId}`)
      assert.deepStrictEqual(comparable(hiddenField), comparable(otherOrg))
      assert.strictEqual((yield* download(app, alice, `/db/objects/${withSecret.json.objectId}`)).status, 200)
      assert.strictEqual((yield* download(app, admin, `/db/objects/${secret.json.objectId}`)).text, "admins only")
      // Signed links cannot be had for what one cannot see either.
      const noLink = yield* http(`${app.base}${url}/link`, { method: "POST", headers: { authorization: `Bearer ${carol}` } })
      assert.deepStrictEqual(comparable(noLink), comparable(otherOrg))

      // An upload handle works in its own database only.
      const borrowed = yield* mutate(app, bob, "Attachment", "add", { projectId: bobProject, file: uploaded.json.handle })
      assert.strictEqual(borrowed.error?.code, "invalid_input")
      const forged = yield* mutate(app, bob, "Attachment", "add", { projectId: bobProject, file: "not-a-handle" })
      assert.deepStrictEqual(forged.error, borrowed.error)

      // Dave becomes a viewer: he can download, and get a signed link that works without a token.
      const membership = yield* created(app, admin, "Member", "add", { projectId: project, subject: "dave", role: "viewer" })
      assert.strictEqual((yield* download(app, dave, url)).text, "top secret")
      const linked = yield* http(`${app.base}${url}/link`, { method: "POST", headers: { authorization: `Bearer ${dave}` } })
      assert.strictEqual(linked.status, 200, linked.text)
      const signed = linked.json.url as string
      const viaLink = yield* download(app, undefined, signed)
      assert.strictEqual(viaLink.status, 200)
      assert.strictEqual(viaLink.text, "top secret")
      // A link is for its own object only, and cannot be altered.
      const tampered = yield* download(app, undefined, signed.slice(0, -3) + (signed.endsWith("A") ? "BBB" : "AAA"))
      assert.deepStrictEqual(comparable(tampered), comparable(otherOrg))
      const moved = yield* download(app, undefined, signed.replace(uploaded.json.objectId, bobUpload.json.objectId))
      assert.deepStrictEqual(comparable(moved), comparable(otherOrg))

      // Removing the membership revokes both at once.
      const removed = yield* mutate(app, admin, "Member", "remove", {}, membership)
      assert.isDefined(removed.value, removed.text)
      assert.deepStrictEqual(comparable(yield* download(app, dave, url)), comparable(otherOrg))
      assert.deepStrictEqual(comparable(yield* download(app, undefined, signed)), comparable(otherOrg))
      // Alice still can.
      assert.strictEqual((yield* download(app, alice, url)).status, 200)
    })
  )

  it.scopedLive("limits: object size, content types and the database's quota", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({
        deployment: filesDeployment,
        env: { ...backend.env, CAIRN_OBJECT_MAX_BYTES: "1000", CAIRN_OBJECT_QUOTA_BYTES: "1500", CAIRN_OBJECT_CONTENT_TYPES: "text/plain, image/*" }
      })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const reader = yield* app.token({ sub: "alice", org: "acme", scope: "db:read" })

      const okBefore = yield* counter(app, "cairn_object_uploads_total", { outcome: "ok" })
      const refusedBefore = yield* counter(app, "cairn_object_uploads_total", { outcome: "payload_too_large" })
      // The engine times every verb, files included, by transport and outcome (a closed set).
      const verb = (outcome: string) => counter(app, "cairn_engine_verb_duration_ms", { transport: "files", verb: "upload", outcome })
      const verbBefore = { ok: yield* verb("ok"), refused: yield* verb("file_refused"), scope: yield* verb("insufficient_scope") }
      const tooBig = yield* upload(app, alice, Buffer.alloc(1001, 1))
      assert.strictEqual(tooBig.status, 413)
      assert.strictEqual(tooBig.json.error, "payload_too_large")
      const script = yield* upload(app, alice, Buffer.from("#!/bin/sh"), { type: "text/html" })
      assert.strictEqual(script.status, 415)
      assert.strictEqual((yield* upload(app, alice, Buffer.alloc(10, 1), { type: "image/png" })).status, 201)
      const noScope = yield* upload(app, reader, Buffer.alloc(10, 1))
      assert.strictEqual(noScope.status, 403)
      const badName = yield* upload(app, alice, Buffer.alloc(10, 1), { name: "a/../b" })
      assert.strictEqual(badName.status, 400)

      assert.strictEqual((yield* upload(app, alice, Buffer.alloc(1000, 2))).status, 201)
      const overQuota = yield* upload(app, alice, Buffer.alloc(1000, 3))
      assert.strictEqual(overQuota.status, 413)
      assert.include(overQuota.json.message, "quota")
      // Another org has its own quota.
      const bob = yield* app.token({ sub: "bob", org: "globex" })
      assert.strictEqual((yield* upload(app, bob, Buffer.alloc(1000, 3))).status, 201)
      // Uploads are counted by outcome.
      assert.strictEqual((yield* counter(app, "cairn_object_uploads_total", { outcome: "ok" })) - okBefore, 3)
      assert.strictEqual((yield* counter(app, "cairn_object_uploads_total", { outcome: "payload_too_large" })) - refusedBefore, 2)
      assert.deepStrictEqual(
        { ok: (yield* verb("ok")) - verbBefore.ok, refused: (yield* verb("file_refused")) - verbBefore.refused, scope: (yield* verb("insufficient_scope")) - verbBefore.scope },
        { ok: 3, refused: 4, scope: 1 }
      )
      // Stored bytes are one series for the deployment (a label per database would be one per tenant) ...
      const gauges = yield* Effect.promise(async () => {
        const { metrics } = (await (await fetch(`${app.base}/__test/metrics`)).json()) as {
          metrics: ReadonlyArray<{ name: string; tags: Record<string, string>; count: number }>
        }
        return metrics.filter((m) => m.name === "cairn_object_stored_bytes")
      })
      assert.deepStrictEqual(gauges.map((g) => [g.tags, g.count]), [[{}, 2010]])
      // ... and the operator reads each database's size from the store.
      const sizes = yield* Effect.orDie(Effect.provideService(ObjectStore.storedBytesByDatabase, ObjectStore.ObjectStore, backend.store(app.dataDir)))
      assert.deepStrictEqual(Object.fromEntries(sizes), { [acme]: 1010, [Digest.databaseId("\u0000orgs\u0000globex")]: 1000 })
    })
  )

  it.scopedLive("concurrent uploads share one quota: together they cannot exceed it", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: { ...backend.env, CAIRN_OBJECT_QUOTA_BYTES: "1500" } })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      // Two uploads of 1,000 bytes each, in flight together: each sends 500 bytes, then the rest later.
      const slow = (fill: number, pauseMs: number) =>
        Effect.promise(async () => {
          let step = 0
          const response = await fetch(`${app.base}/db/objects`, {
            method: "POST",
            headers: { authorization: `Bearer ${alice}`, "content-type": "application/octet-stream" },
            body: new ReadableStream<Uint8Array>({
              async pull(controller) {
                if (step === 0) controller.enqueue(new Uint8Array(500).fill(fill))
                else if (step === 1) {
                  await new Promise((resolve) => setTimeout(resolve, pauseMs))
                  controller.enqueue(new Uint8Array(500).fill(fill))
                } else controller.close()
                step++
              }
            }),
            duplex: "half"
          } as RequestInit)
          return response.status
        })
      const statuses = yield* Effect.all([slow(1, 400), slow(2, 800)], { concurrency: 2 })
      assert.deepStrictEqual([...statuses].sort(), [201, 413])
    })
  )

  it.scopedLive("replaced, deleted and never-attached objects are collected; referenced ones are kept", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({
        deployment: filesDeployment,
        env: { ...backend.env, CAIRN_OBJECT_RETENTION: "0 millis", CAIRN_OBJECT_UPLOAD_TTL: "3 seconds", CAIRN_OBJECT_COLLECT_EVERY: "200 millis" }
      })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const project = yield* created(app, alice, "Project", "create", { name: "Churn" })
      const first = yield* upload(app, alice, Buffer.from("first version"))
      const second = yield* upload(app, alice, Buffer.from("second version"))
      const kept = yield* upload(app, alice, Buffer.from("kept"))
      const stray = yield* upload(app, alice, Buffer.from("never attached"))
      const doomed = yield* upload(app, alice, Buffer.from("deleted with its record"))

      const replaced = yield* created(app, alice, "Attachment", "add", { projectId: project, file: first.json.handle })
      assert.isDefined((yield* mutate(app, alice, "Attachment", "replace", { file: second.json.handle }, replaced)).value)
      yield* created(app, alice, "Attachment", "add", { projectId: project, file: kept.json.handle })
      const keptWritten = yield* backend.modified(app.dataDir, acme, kept.json.sha256)
      const deleted = yield* created(app, alice, "Attachment", "add", { projectId: project, file: doomed.json.handle })
      assert.isDefined((yield* mutate(app, alice, "Attachment", "remove", {}, deleted)).value)

      const anyStored = (uploads: ReadonlyArray<typeof first>) =>
        Effect.map(Effect.forEach(uploads, (u) => backend.exists(app.dataDir, acme, u.json.sha256)), (found) => found.some(Boolean))
      // Polls the collector (every 200 ms); the test's own timeout bounds the wait.
      while (yield* anyStored([first, stray, doomed])) yield* Effect.sleep("100 millis")
      assert.isTrue(yield* backend.exists(app.dataDir, acme, second.json.sha256))
      assert.isTrue(yield* backend.exists(app.dataDir, acme, kept.json.sha256))
      // Many passes (every 200 ms, over more than the 3 s window) never rewrote a referenced object: on S3
      // a copy onto itself is a new version in a versioned bucket, and would move its LastModified.
      assert.strictEqual(yield* backend.modified(app.dataDir, acme, kept.json.sha256), keptWritten)
      const rows = yield* attachments(app, alice)
      assert.strictEqual(rows.length, 2)
      for (const row of rows) assert.strictEqual((yield* download(app, alice, row.file.url)).status, 200)
      // An expired handle attaches nothing.
      const expired = yield* mutate(app, alice, "Attachment", "add", { projectId: project, file: stray.json.handle })
      assert.strictEqual(expired.error?.code, "invalid_input")
    }),
    30_000
  )

  it.scopedLive("backups include the objects: a database restored elsewhere serves its files", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const project = yield* created(app, alice, "Project", "create", { name: "Archive" })
      const bytes = Buffer.from("kept in the backup")
      const uploaded = yield* upload(app, alice, bytes)
      yield* created(app, alice, "Attachment", "add", { projectId: project, file: uploaded.json.handle })

      // Online, while the server runs, with the deployment's store (as `cairn backup` provides it).
      const databaseId = Digest.databaseId("\u0000orgs\u0000acme")
      const withStore = <A, E>(effect: Effect.Effect<A, E>, dataDir: string) => Effect.provideService(effect, ObjectStore.ObjectStore, backend.store(dataDir))
      const backups = mkdtempSync(join(tmpdir(), "cairn-object-backups-"))
      const deploymentId = yield* Backup.deploymentIdOf(app.dataDir)
      yield* withStore(Backup.backupDatabase({ dataDir: app.dataDir, deploymentId, databaseId, to: backups }), app.dataDir)
      assert.isTrue(existsSync(join(backups, "objects", databaseId, uploaded.json.sha256)))
      assert.deepStrictEqual(readFileSync(join(backups, "objects", databaseId, uploaded.json.sha256)), bytes)
      // The store loses the object (a bucket emptied, a disk replaced).
      yield* Effect.orDie(backend.store(app.dataDir).remove(databaseId, uploaded.json.sha256))
      assert.isFalse(yield* backend.exists(app.dataDir, databaseId, uploaded.json.sha256))

      // Elsewhere, for the same deployment (the data directory's identity goes with it), on the same kind of store.
      const fresh = mkdtempSync(join(tmpdir(), "cairn-object-restored-"))
      copyFileSync(join(app.dataDir, "deployment-id"), join(fresh, "deployment-id"))
      const { operations } = yield* Effect.orDie(Deployment.make(filesDeployment))
      yield* withStore(
        Restore.restore({ from: backups, dataDir: fresh, databaseId, deploymentId: yield* Backup.deploymentIdOf(fresh), catalog: operations.catalog }),
        fresh
      )
      assert.isTrue(yield* backend.exists(fresh, databaseId, uploaded.json.sha256))

      const restored = yield* startApp({ deployment: filesDeployment, dataDir: fresh, env: backend.env })
      const again = yield* restored.token({ sub: "alice", org: "acme" })
      const [row] = yield* attachments(restored, again)
      const got = yield* download(restored, again, row!.file.url)
      assert.strictEqual(got.status, 200)
      assert.isTrue(got.body.equals(bytes))
    })
  )

  it.scopedLive("resumable (TUS 1.0): an interrupted upload resumes from the offset the server kept, then attaches like any other", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const bob = yield* app.token({ sub: "bob", org: "globex" })
      const project = yield* created(app, alice, "Project", "create", { name: "Resumable" })
      const bytes = Buffer.alloc(3 * 1024 * 1024)
      for (let i = 0; i < bytes.length; i += 4) bytes.writeUInt32BE(i, i)
      const tus = { "tus-resumable": "1.0.0" }
      const b64 = (s: string) => Buffer.from(s).toString("base64")

      const creation = yield* http(`${app.base}/db/objects/resumable`, {
        method: "POST",
        headers: { authorization: `Bearer ${alice}`, ...tus, "upload-length": String(bytes.length), "upload-metadata": `filename ${b64("big.bin")},filetype ${b64("application/octet-stream")}` }
      })
      assert.strictEqual(creation.status, 201, creation.text)
      const location = creation.headers.get("location")!
      assert.match(location, /^\/db\/objects\/resumable\/[0-9a-f]+$/)
      const head = (token: string) => http(`${app.base}${location}`, { method: "HEAD", headers: { authorization: `Bearer ${token}`, ...tus } })

      // The first PATCH dies half way: its connection is cut after 1 MiB.
      const cut = 1024 * 1024
      yield* Effect.promise(async () => {
        let sent = false
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            if (!sent) {
              sent = true
              controller.enqueue(bytes.subarray(0, cut))
              return
            }
            await new Promise((resolve) => setTimeout(resolve, 500))
            controller.error(new Error("connection lost"))
          }
        })
        await fetch(`${app.base}${location}`, {
          method: "PATCH",
          headers: { authorization: `Bearer ${alice}`, ...tus, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
          body,
          duplex: "half"
        } as RequestInit).then((r) => r.text()).catch(() => undefined)
      })
      let offset = -1
      for (;;) {
        const probe = yield* head(alice)
        if (probe.status === 200) {
          offset = Number(probe.headers.get("upload-offset"))
          break
        }
        yield* Effect.sleep("50 millis")
      }
      assert.isAbove(offset, 0)
      assert.isAtMost(offset, cut)
      // Another database cannot even see the partial upload.
      assert.strictEqual((yield* head(bob)).status, 404)
      // Nor can another caller of the same database holding its URL: it cannot see it, write into
      // it, finish it (taking the handle) or cancel it; every answer is that of a missing upload.
      const carol = yield* app.token({ sub: "carol", org: "acme" })
      const missing = yield* http(`${app.base}/db/objects/resumable/${"0".repeat(64)}`, { method: "HEAD", headers: { authorization: `Bearer ${carol}`, ...tus } })
      assert.strictEqual(missing.status, 404)
      const foreign = [
        yield* head(carol),
        yield* http(`${app.base}${location}`, {
          method: "PATCH",
          headers: { authorization: `Bearer ${carol}`, ...tus, "upload-offset": String(offset), "content-type": "application/offset+octet-stream" },
          body: bytes.subarray(offset) as unknown as BodyInit
        }),
        yield* http(`${app.base}${location}`, { method: "DELETE", headers: { authorization: `Bearer ${carol}`, ...tus } })
      ]
      for (const answer of foreign) assert.strictEqual(answer.status, 404, answer.text)
      assert.strictEqual(foreign[1]!.text, (yield* http(`${app.base}/db/objects/resumable/${"0".repeat(64)}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${carol}`, ...tus, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
        body: "x"
      })).text)
      assert.strictEqual(Number((yield* head(alice)).headers.get("upload-offset")), offset)

      const finish = yield* http(`${app.base}${location}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${alice}`, ...tus, "upload-offset": String(offset), "content-type": "application/offset+octet-stream" },
        body: bytes.subarray(offset) as unknown as BodyInit
      })
      assert.strictEqual(finish.status, 200, finish.text)
      assert.strictEqual(finish.json.sha256, createHash("sha256").update(bytes).digest("hex"))
      assert.strictEqual(finish.json.name, "big.bin")
      yield* created(app, alice, "Attachment", "add", { projectId: project, file: finish.json.handle })
      const [row] = yield* attachments(app, alice)
      const got = yield* download(app, alice, row!.file.url)
      assert.isTrue(got.body.equals(bytes))
    })
  )

  it.scopedLive("MCP: describe shows file fields, mutate attaches a small file inline, query answers its metadata and url", () =>
    Effect.gen(function* () {
      const backend = yield* acquire
      const app = yield* startApp({ deployment: filesDeployment, env: { ...backend.env, CAIRN_OBJECT_INLINE_MAX_BYTES: "1000" } })
      const agent = yield* app.token({ sub: "alice", org: "acme", resource: "mcp" })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const described = yield* mcp(app, agent, "describe", { inspect: [{ kind: "entity", name: "Attachment" }, op("Attachment", "add")] })
      assert.include(described.text, "sha256")
      assert.include(described.text, "base64")

      const projectAnswer = yield* mcp(app, agent, "mutate", { operation: op("Project", "create"), input: { name: "Agents" }, invocationId: newInvocationId() })
      const projectId = projectAnswer.value.output.id as string
      const content = Buffer.from("notes an agent wrote")
      const attached = yield* mcp(app, agent, "mutate", {
        operation: op("Attachment", "add"),
        input: { projectId, file: { name: "notes.txt", contentType: "text/plain", base64: content.toString("base64") } },
        invocationId: newInvocationId()
      })
      assert.isUndefined(attached.error, attached.text)
      const queried = yield* mcp(app, agent, "query", {
        query: { version: 1, from: { kind: "entity", name: "Attachment" }, select: { file: { path: ["file"] } } }
      })
      const file = queried.value.rows[0].file
      assert.strictEqual(file.sha256, createHash("sha256").update(content).digest("hex"))
      assert.strictEqual(file.name, "notes.txt")
      // An agent holds no token for /db: its url is a short-lived signed link (absolute), usable as it is.
      assert.match(file.url, new RegExp(`^${app.base}/db/objects/${file.objectId}\\?link=`))
      assert.strictEqual((yield* http(file.url)).text, content.toString())
      // The same record over /db/rpc keeps the gated path, for the bearer token.
      const overRpc = yield* rpc(app, alice, "Query", { query: { version: 1, from: { kind: "entity", name: "Attachment" }, select: { file: { path: ["file"] } } } })
      assert.strictEqual(overRpc.value.rows[0].file.url, `/db/objects/${file.objectId}`)
      assert.strictEqual((yield* download(app, alice, overRpc.value.rows[0].file.url)).text, content.toString())

      // Over the inline limit, or not base64: invalid_input, nothing attached.
      const tooLarge = yield* mcp(app, agent, "mutate", {
        operation: op("Attachment", "add"),
        input: { projectId, file: { name: "big.bin", contentType: "application/octet-stream", base64: Buffer.alloc(1001).toString("base64") } },
        invocationId: newInvocationId()
      })
      assert.strictEqual(tooLarge.error?.code, "invalid_input")
      const notBase64 = yield* mcp(app, agent, "mutate", {
        operation: op("Attachment", "add"),
        input: { projectId, file: { name: "x.txt", contentType: "text/plain", base64: "not base64!" } },
        invocationId: newInvocationId()
      })
      assert.strictEqual(notBase64.error?.code, "invalid_input")
      assert.strictEqual((yield* attachments(app, alice)).length, 1)
    })
  )
})
}

describe("object storage (filesystem)", () => {
  it.scopedLive("defaults protect a shared deployment: 100 MiB a file, 1 GiB a database, only types a browser never runs", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ deployment: filesDeployment })
      const alice = yield* app.token({ sub: "alice", org: "acme" })
      const bob = yield* app.token({ sub: "bob", org: "acme" })
      // Pages, images with scripts and scripts are refused; what a browser only shows or saves is taken.
      for (const type of ["text/html", "image/svg+xml", "application/xhtml+xml", "text/javascript", "application/xml"]) {
        const refused = yield* upload(app, alice, Buffer.from("<script>alert(1)</script>"), { type })
        assert.strictEqual(refused.status, 415, type)
        assert.include(refused.json.message, `Files of type "${type}" are not accepted here`)
        assert.include(refused.json.message, "image/png")
      }
      for (const type of ["image/png", "application/pdf", "text/plain", "application/octet-stream", "video/mp4"]) {
        assert.strictEqual((yield* upload(app, alice, Buffer.from(type), { type })).status, 201, type)
      }
      // Sizes are refused when declared (a resumable upload's creation), before any byte is sent.
      const tus = { "tus-resumable": "1.0.0" }
      const create = (token: string, size: number) =>
        http(`${app.base}/db/objects/resumable`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, ...tus, "upload-length": String(size), "upload-metadata": `filetype ${Buffer.from("video/mp4").toString("base64")}` }
        })
      const MiB = 1024 * 1024
      assert.strictEqual((yield* create(alice, 100 * MiB + 1)).status, 413)
      // A plain upload that declares more is refused from its headers, its body unread.
      const declared = yield* Effect.promise(
        () =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const request = httpRequest(`${app.base}/db/objects`, {
              method: "POST",
              agent: false,
              headers: { authorization: `Bearer ${alice}`, "content-type": "video/mp4", "content-length": String(100 * MiB + 1) }
            })
            request.on("response", (response) => {
              let body = ""
              response
                .setEncoding("utf8")
                .on("data", (chunk: string) => (body += chunk))
                .on("end", () => {
                  resolve({ status: response.statusCode ?? 0, body })
                  request.destroy()
                })
            })
            request.on("error", reject)
            request.write(Buffer.alloc(1024))
          })
      )
      assert.strictEqual(declared.status, 413)
      assert.include(JSON.parse(declared.body).message, "larger than the limit of 104857600 bytes")
      // Ten files of 100 MiB fit in the database's 1 GiB; the eleventh does not, whoever sends it.
      for (let i = 0; i < 10; i++) assert.strictEqual((yield* create(i < 5 ? alice : bob, 100 * MiB)).status, 201)
      const overQuota = yield* create(bob, 100 * MiB)
      assert.strictEqual(overQuota.status, 413, overQuota.text)
      assert.include(overQuota.text, "quota of 1073741824 bytes")
      // Another database has its own.
      const carol = yield* app.token({ sub: "carol", org: "globex" })
      assert.strictEqual((yield* create(carol, 100 * MiB)).status, 201)
    })
  )

  it.scopedLive("through the generated bindings: upload, attach with the handle, query the metadata, download", () =>
    Effect.gen(function* () {
      // The checked-in bindings are the generator's output for the fixture's catalog.
      const catalog = yield* Effect.orDie(compile(filesDeployment.root))
      const expected = generate(catalog, { bindingsModule: "@cairn/client/Bindings" })
        .replace("// Generated by `npm run bindings` (scripts/bindings.ts)", "// Generated by `generate` (apps/server/src/BindingsGenerator.ts)")
        .replace("A test fails when this file no longer matches the catalog.", "ObjectsEndToEnd checks it against the catalog.")
      assert.strictEqual(readFileSync(join(import.meta.dirname, "support", "filesBindings.ts"), "utf8"), expected)

      const app = yield* startApp({ deployment: filesDeployment })
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const alice = app.as(token)
      const project = (yield* alice(files.Project.create({ input: { name: "Bound" } }))).output.id
      const bytes = Buffer.from("typed all the way")
      const uploaded = yield* upload(app, token, bytes, { name: "typed.txt" })
      yield* alice(files.Attachment.add({ input: { projectId: project, file: uploaded.json.handle, caption: "typed" } }))
      const page = yield* alice(files.Attachment.query({ select: { file: { path: ["file"] }, caption: { path: ["caption"] } } }))
      const file = page.rows[0]!.file as unknown as { name: string; sha256: string; url: string }
      assert.strictEqual(file.name, "typed.txt")
      assert.strictEqual(file.sha256, uploaded.json.sha256)
      assert.isTrue((yield* download(app, token, file.url)).body.equals(bytes))
    })
  )
})

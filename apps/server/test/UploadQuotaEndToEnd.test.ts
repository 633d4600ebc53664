// Unfinished uploads count against a database's file quota, through the server as `npm start`
// assembles it (the `files` fixture), on the filesystem and on S3 (s3rver):
// - resumable uploads promise their declared bytes at creation, together with stored files;
// - concurrent creations race for the last bytes and at most the quota is promised;
// - bounds on unfinished uploads per caller and per database;
// - a deferred-length upload is granted room request by request;
// - TUS details: a PATCH of another Content-Type is 415; answers without an Origin grant no CORS;
// - a property over random create/patch/cancel/finish/upload/restart sequences: stored plus
//   promised bytes never exceed the quota, every answer is the one a model of the ledger
//   predicts, and after the collector runs the disk holds exactly the stored objects of
//   successful uploads and the partials of live unfinished ones.
import { createHash, randomBytes } from "node:crypto"
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"
import { ListObjectsV2Command } from "@aws-sdk/client-s3"
import { Digest } from "@cairn/catalog"
import { s3Client } from "@cairn/server/engine/S3ObjectStore"
import { filesDeployment } from "@cairn/testkit/fixture/files"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as fc from "fast-check"
import { type Backend, filesystem, s3 } from "./support/objectBackends.js"
import { type Running, startApp } from "./support/app.js"

const tus = { "tus-resumable": "1.0.0" }
const b64 = (s: string) => Buffer.from(s).toString("base64")
const databaseIdOf = (org: string) => Digest.databaseId(`\u0000orgs\u0000${org}`)

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}
const send = (url: string, init: RequestInit) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const client = (app: Running, token: string) => ({
  create: (size: number | "deferred", type = "application/octet-stream") =>
    send(`${app.base}/db/objects/resumable`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        ...tus,
        ...(size === "deferred" ? { "upload-defer-length": "1" } : { "upload-length": String(size) }),
        "upload-metadata": `filename ${b64("f.bin")},filetype ${b64(type)}`
      }
    }),
  patch: (location: string, offset: number, bytes: Uint8Array, extra: Record<string, string> = {}) =>
    send(`${app.base}${location}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${token}`, ...tus, "upload-offset": String(offset), "content-type": "application/offset+octet-stream", ...extra },
      body: bytes as unknown as BodyInit
    }),
  cancel: (location: string) => send(`${app.base}${location}`, { method: "DELETE", headers: { authorization: `Bearer ${token}`, ...tus } }),
  head: (location: string) => send(`${app.base}${location}`, { method: "HEAD", headers: { authorization: `Bearer ${token}`, ...tus } }),
  upload: (bytes: Uint8Array) =>
    send(`${app.base}/db/objects`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream" },
      body: bytes as unknown as BodyInit
    })
})

const quotaOf = (text: string) => /quota of (\d+) bytes/.exec(text)?.[1]

const setups = [
  ["filesystem", Effect.succeed(filesystem)],
  ["s3 via s3rver", s3]
] as const

for (const [name, acquire] of setups) {
  describe(`upload quota (${name})`, () => {
    it.scopedLive("unfinished resumable uploads count with stored files; refusals name the quota, never the free bytes", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const app = yield* startApp({ deployment: filesDeployment, env: { ...backend.env, CAIRN_OBJECT_QUOTA_BYTES: "10000" } })
        const alice = client(app, yield* app.token({ sub: "alice", org: "acme" }))
        assert.strictEqual((yield* alice.upload(randomBytes(4000))).status, 201)
        const big = yield* alice.create(5000)
        assert.strictEqual(big.status, 201, big.text)
        // 4000 stored + 5000 promised: 2000 more do not fit, whether resumable or plain.
        const over = yield* alice.create(2000)
        assert.strictEqual(over.status, 413)
        assert.strictEqual(quotaOf(over.text), "10000")
        assert.notMatch(over.text, /free|1000 bytes/)
        const plain = yield* alice.upload(randomBytes(2000))
        assert.strictEqual(plain.status, 413)
        assert.strictEqual(JSON.parse(plain.text).limitBytes, 10000)
        assert.notMatch(plain.text, /free/)
        // A cancelled upload gives its bytes back.
        assert.strictEqual((yield* alice.cancel(big.headers.get("location")!)).status, 204)
        assert.strictEqual((yield* alice.create(2000)).status, 201)
        assert.strictEqual((yield* alice.upload(randomBytes(3000))).status, 201)
      }))

    it.scopedLive("concurrent creations race for the last bytes: at most the quota is promised", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const app = yield* startApp({
          deployment: filesDeployment,
          env: { ...backend.env, CAIRN_OBJECT_QUOTA_BYTES: "10000", CAIRN_OBJECT_UNFINISHED_PER_PRINCIPAL: "50", CAIRN_OBJECT_UNFINISHED_PER_DATABASE: "50" }
        })
        const tokens = yield* Effect.forEach(["alice", "bob", "carol", "dave"], (sub) => app.token({ sub, org: "acme" }))
        const answers = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) => client(app, tokens[i % tokens.length]!).create(3000),
          { concurrency: "unbounded" }
        )
        const statuses = answers.map((a) => a.status).sort()
        assert.deepStrictEqual(statuses, [...Array(3).fill(201), ...Array(17).fill(413)])
        // And a plain upload racing the rest cannot take the last 1000 twice.
        const rest = yield* Effect.forEach(tokens, (t) => client(app, t).upload(randomBytes(1000)), { concurrency: "unbounded" })
        assert.deepStrictEqual(rest.map((a) => a.status).sort(), [201, 413, 413, 413])
      }))

    it.scopedLive("bounds on unfinished uploads per caller and per database", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const app = yield* startApp({
          deployment: filesDeployment,
          env: { ...backend.env, CAIRN_OBJECT_UNFINISHED_PER_PRINCIPAL: "2", CAIRN_OBJECT_UNFINISHED_PER_DATABASE: "3" }
        })
        const alice = client(app, yield* app.token({ sub: "alice", org: "acme" }))
        const bob = client(app, yield* app.token({ sub: "bob", org: "acme" }))
        const first = yield* alice.create(10)
        assert.strictEqual(first.status, 201)
        assert.strictEqual((yield* alice.create(10)).status, 201)
        const third = yield* alice.create(10)
        assert.strictEqual(third.status, 429)
        assert.match(third.text, /You have 2 unfinished resumable uploads/)
        assert.strictEqual((yield* bob.create(10)).status, 201)
        const full = yield* bob.create(10)
        assert.strictEqual(full.status, 429)
        assert.match(full.text, /This database has 3 unfinished/)
        // Finishing one frees its place.
        assert.strictEqual((yield* alice.patch(first.headers.get("location")!, 0, randomBytes(10))).status, 200)
        assert.strictEqual((yield* bob.create(10)).status, 201)
      }))

    it.scopedLive("a deferred-length upload is granted room request by request, within the quota", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const app = yield* startApp({ deployment: filesDeployment, env: { ...backend.env, CAIRN_OBJECT_QUOTA_BYTES: "10000" } })
        const alice = client(app, yield* app.token({ sub: "alice", org: "acme" }))
        const deferred = yield* alice.create("deferred")
        assert.strictEqual(deferred.status, 201, deferred.text)
        const location = deferred.headers.get("location")!
        assert.strictEqual((yield* alice.patch(location, 0, randomBytes(6000))).status, 204)
        // Its 6000 bytes are promised: 5000 more do not fit beside them.
        assert.strictEqual((yield* alice.create(5000)).status, 413)
        const fits = yield* alice.create(3000)
        assert.strictEqual(fits.status, 201)
        // 1000 bytes are left: a PATCH of 2000 is refused, nothing of it kept.
        assert.strictEqual((yield* alice.patch(location, 6000, randomBytes(2000))).status, 413)
        assert.strictEqual((yield* alice.head(location)).headers.get("upload-offset"), "6000")
        // Declaring its length within what is left finishes it.
        const done = yield* alice.patch(location, 6000, randomBytes(500), { "upload-length": "6500" })
        assert.strictEqual(done.status, 200, done.text)
        assert.strictEqual(JSON.parse(done.text).size, 6500)
      }))

    it.scopedLive("TUS details: a PATCH of another Content-Type is 415; answers without an Origin carry no CORS grant", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const app = yield* startApp({ deployment: filesDeployment, env: backend.env })
        const alice = client(app, yield* app.token({ sub: "alice", org: "acme" }))
        const created = yield* alice.create(10)
        const location = created.headers.get("location")!
        const wrong = yield* alice.patch(location, 0, randomBytes(10), { "content-type": "application/json" })
        assert.strictEqual(wrong.status, 415)
        assert.strictEqual((yield* alice.head(location)).headers.get("upload-offset"), "0")
        for (const answer of [created, wrong, yield* alice.head(location), yield* alice.patch(location, 0, randomBytes(10))]) {
          assert.deepStrictEqual([...answer.headers.keys()].filter((h) => h.startsWith("access-control-")), [])
        }
      }))
  })
}

/** The steps of the property, and a model of what the ledger must answer. */
type Step =
  | { readonly _tag: "create"; readonly who: number; readonly size: number }
  | { readonly _tag: "patch"; readonly pick: number; readonly bytes: number }
  | { readonly _tag: "finish"; readonly pick: number }
  | { readonly _tag: "cancel"; readonly pick: number }
  | { readonly _tag: "upload"; readonly who: number; readonly size: number; readonly duplicate: boolean }
  | { readonly _tag: "restart" }

// Sizes near a third of the quota, so that sequences reach the quota within a few steps.
const size = fc.integer({ min: 200, max: 900 })
const step: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: fc.record({ _tag: fc.constant("create" as const), who: fc.nat(1), size }), weight: 4 },
  { arbitrary: fc.record({ _tag: fc.constant("patch" as const), pick: fc.nat(), bytes: fc.integer({ min: 1, max: 400 }) }), weight: 2 },
  { arbitrary: fc.record({ _tag: fc.constant("finish" as const), pick: fc.nat() }), weight: 2 },
  { arbitrary: fc.record({ _tag: fc.constant("cancel" as const), pick: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ _tag: fc.constant("upload" as const), who: fc.nat(1), size, duplicate: fc.boolean() }), weight: 3 },
  { arbitrary: fc.constant({ _tag: "restart" as const }), weight: 1 }
)

const QUOTA = 2000
const PER_PRINCIPAL = 3

/** The blobs stored for the database: name → size. */
const storedBlobs = (backend: Backend, dataDir: string, env: Record<string, string>, databaseId: string) =>
  backend.name === "filesystem"
    ? Effect.sync(() => {
        const area = join(dataDir, "objects", databaseId)
        return existsSync(area) ? readdirSync(area).filter((n) => /^[0-9a-f]{64}$/.test(n)) : []
      })
    : Effect.promise(async () => {
        const s3c = s3Client({ region: "us-east-1", endpoint: env["CAIRN_S3_ENDPOINT"]!, forcePathStyle: true, credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } })
        const page = await s3c.send(new ListObjectsV2Command({ Bucket: env["CAIRN_S3_BUCKET"]!, Prefix: `${databaseId}/` }))
        return (page.Contents ?? []).map((c) => c.Key!.slice(c.Key!.lastIndexOf("/") + 1))
      })

const partialsOnDisk = (dataDir: string, databaseId: string) => {
  const dir = join(dataDir, "uploads", databaseId)
  return existsSync(dir) ? readdirSync(dir).filter((n) => /^[0-9a-f]{64}$/.test(n)).sort() : []
}

for (const [name, acquire] of setups) {
  describe(`upload quota property (${name})`, () => {
    it.scopedLive("random create/patch/cancel/finish/upload/restart sequences: stored + promised <= quota, answers as the model says, the disk as the model says", () =>
      Effect.gen(function* () {
        const backend = yield* acquire
        const env = {
          ...backend.env,
          CAIRN_OBJECT_QUOTA_BYTES: String(QUOTA),
          CAIRN_OBJECT_UNFINISHED_PER_PRINCIPAL: String(PER_PRINCIPAL),
          CAIRN_OBJECT_COLLECT_EVERY: "100 millis"
        }
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.array(step, { minLength: 4, maxLength: 18 }), async (steps) =>
              Effect.runPromise(
                Effect.scoped(
                  Effect.gen(function* () {
                    let scope = yield* Scope.make()
                    let app = yield* Scope.extend(startApp({ deployment: filesDeployment, env }), scope)
                    // A database of its own per run: the S3 bucket outlives the runs.
                    const org = `acme-${randomBytes(6).toString("hex")}`
                    const tokens = async () => [await Effect.runPromise(app.token({ sub: "alice", org })), await Effect.runPromise(app.token({ sub: "bob", org }))]
                    let who = yield* Effect.promise(tokens)
                    // The model: stored bytes by sha256, and live unfinished uploads with their declared size and offset.
                    const stored = new Map<string, number>()
                    const live: Array<{ location: string; size: number; offset: number; bytes: Buffer; who: number }> = []
                    let lastPlain: Buffer | undefined
                    const total = () => [...stored.values()].reduce((a, b) => a + b, 0) + live.reduce((a, u) => a + u.size, 0)
                    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex")
                    for (const s of steps) {
                      if (s._tag === "restart") {
                        yield* Scope.close(scope, Exit.void)
                        scope = yield* Scope.make()
                        app = yield* Scope.extend(startApp({ deployment: filesDeployment, env, restartOf: app }), scope)
                        who = yield* Effect.promise(tokens)
                      } else if (s._tag === "create") {
                        const answer = yield* client(app, who[s.who]!).create(s.size)
                        const mine = live.filter((u) => u.who === s.who).length
                        const expected = mine >= PER_PRINCIPAL ? 429 : total() + s.size > QUOTA ? 413 : 201
                        assert.strictEqual(answer.status, expected, answer.text)
                        if (answer.status === 201) live.push({ location: answer.headers.get("location")!, size: s.size, offset: 0, bytes: randomBytes(s.size), who: s.who })
                      } else if (s._tag === "upload") {
                        const bytes = s.duplicate && lastPlain !== undefined ? lastPlain : randomBytes(s.size)
                        const answer = yield* client(app, who[s.who]!).upload(bytes)
                        assert.strictEqual(answer.status, total() + bytes.length > QUOTA ? 413 : 201, answer.text)
                        if (answer.status === 201) {
                          stored.set(sha(bytes), bytes.length)
                          lastPlain = bytes
                        }
                      } else if (live.length > 0) {
                        const index = s.pick % live.length
                        const upload = live[index]!
                        const as = client(app, who[upload.who]!)
                        if (s._tag === "cancel") {
                          assert.strictEqual((yield* as.cancel(upload.location)).status, 204)
                          live.splice(index, 1)
                        } else {
                          const end = s._tag === "finish" ? upload.size : Math.min(upload.size - 1, upload.offset + s.bytes)
                          if (end <= upload.offset) continue
                          const answer = yield* as.patch(upload.location, upload.offset, upload.bytes.subarray(upload.offset, end))
                          assert.strictEqual(answer.status, end === upload.size ? 200 : 204, answer.text)
                          upload.offset = end
                          if (end === upload.size) {
                            live.splice(index, 1)
                            stored.set(sha(upload.bytes), upload.size)
                          }
                        }
                      }
                      // Outside the model too: what is stored plus what is promised never exceeds the quota.
                      assert.isAtMost(total(), QUOTA)
                    }
                    // After the collector (every 100 ms): exactly the stored objects (all handles still valid) and the live partials.
                    yield* Effect.sleep("400 millis")
                    assert.deepStrictEqual([...(yield* storedBlobs(backend, app.dataDir, env, databaseIdOf(org)))].sort(), [...stored.keys()].sort())
                    assert.deepStrictEqual(partialsOnDisk(app.dataDir, databaseIdOf(org)), live.map((u) => u.location.slice(u.location.lastIndexOf("/") + 1)).sort())
                    yield* Scope.close(scope, Exit.void)
                  })
                )
              )
            ),
            { numRuns: 10 }
          )
        )
      }), { timeout: 600_000 })
  })
}

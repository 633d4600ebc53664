/**
 * `npm run bench -- objects`: object storage throughput against a raw filesystem copy of
 * the same bytes, measured in the same run. The server (the `files` test app) runs in its
 * own process as `npm start` runs an app. Upload: a 256 MiB file streamed over loopback
 * HTTP (node:http) into `POST /db/objects` (sha256 while streaming, fsync before the answer) versus
 * copying the file to another file with fsync. Download: `GET /db/objects/:id` streamed
 * into a file (fsynced) versus the same file copy. Best of 3 each. Prints
 * `objects: upload_ratio=<r> download_ratio=<r>` (throughput ÷ raw copy's; targets ≥ 0.5, ≥ 0.8).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, createReadStream, createWriteStream, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { get as httpGet, type IncomingMessage, request as httpRequest } from "node:http"
import { pipeline } from "node:stream/promises"
import { ConfigProvider, Effect } from "effect"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { Settings, settingsConfig } from "@cairn/server/operations/Settings"
import { freePort } from "@cairn/testkit/freePort"

const ROUNDS = 3
const SIZE = 256 * 1024 * 1024

const waitHealthy = async (base: string) => {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/health`)).ok) return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error("the server did not start")
}

const timed = async (f: () => Promise<void>) => {
  const started = performance.now()
  await f()
  return performance.now() - started
}

const fsyncPath = (path: string) => {
  const fd = openSync(path, "r+")
  fsyncSync(fd)
  closeSync(fd)
}

/** The raw baseline: the bytes of `from` into a new file, fsynced. */
const rawCopy = async (from: string, to: string) => {
  await pipeline(createReadStream(from, { highWaterMark: 256 * 1024 }), createWriteStream(to))
  fsyncPath(to)
}

export const run = async () => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-objects-"))
  const dataDir = join(dir, "data")
  const source = join(dir, "source.bin")
  const fd = openSync(source, "w")
  const block = Buffer.alloc(1024 * 1024)
  for (let i = 0; i < SIZE / block.length; i++) {
    block.fill(i % 251)
    block.writeUInt32BE(i, 0)
    writeSync(fd, block)
  }
  fsyncSync(fd)
  closeSync(fd)

  const port = await Effect.runPromise(freePort())
  const issuer = `http://127.0.0.1:${await Effect.runPromise(freePort())}`
  const env = {
    ...process.env,
    CAIRN_PORT: String(port),
    CAIRN_DATA_DIR: dataDir,
    CAIRN_STAGE: "test",
    CAIRN_DEV_ISSUER_URL: issuer,
    CAIRN_REQUEST_TIMEOUT_MS: "600000",
    // Raised for the bench's large file: the defaults (100 MiB a file, 1 GiB a database) protect a shared deployment.
    CAIRN_OBJECT_MAX_BYTES: String(2 * 1024 * 1024 * 1024),
    CAIRN_OBJECT_QUOTA_BYTES: String(4 * 1024 * 1024 * 1024),
    CAIRN_LOG_LEVEL: "Warning"
  }
  const server: ChildProcess = spawn(process.execPath, ["--import", "tsx", "apps/server/test/support/filesServer.ts"], { env, stdio: "ignore" })
  const base = `http://127.0.0.1:${port}`
  try {
    await waitHealthy(base)
    const config = ConfigProvider.fromMap(new Map(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)))
    const token = await Effect.runPromise(
      Effect.gen(function* () {
        const settings = yield* settingsConfig
        const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings))
        return yield* signDevToken(dev, { subject: "bench", audience: `${base}/db`, claims: { org: "acme" }, scope: accessScopes.join(" "), ttlSeconds: 3600 })
      }).pipe(Effect.withConfigProvider(config), Effect.orDie)
    )
    const rpc = async (payload: unknown) => {
      const response = await fetch(`${base}/db/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ _tag: "Request", id: "1", tag: "Mutate", payload, headers: [] })
      })
      return (JSON.parse(await response.text()) as Array<any>).find((m) => m._tag === "Exit").exit.value
    }
    const op = (entity: string, name: string) => ({ kind: "operation", owner: { kind: "entity", name: entity }, name })
    const { v7 } = await import("uuid")
    const project = await rpc({ operation: op("Project", "create"), input: { name: "bench" }, invocationId: v7() })

    let upload = Infinity
    let download = Infinity
    let raw = Infinity
    let objectId = ""
    for (let round = 0; round < ROUNDS; round++) {
      // Each round uploads different bytes (the first block differs), so de-duplication never short-cuts it.
      const marker = Buffer.from(`round ${round} ${Date.now()}`)
      raw = Math.min(raw, await timed(() => rawCopy(source, join(dir, `copy-${round}.bin`))))
      rmSync(join(dir, `copy-${round}.bin`))
      upload = Math.min(
        upload,
        await timed(async () => {
          const answer = await new Promise<{ status: number; json: { handle: string; objectId: string } }>((resolve, reject) => {
            const request = httpRequest(
              `${base}/db/objects`,
              { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/octet-stream", "content-length": String(SIZE + marker.length) } },
              (response) => {
                let text = ""
                response.setEncoding("utf8")
                response.on("data", (d: string) => (text += d))
                response.on("end", () => resolve({ status: response.statusCode ?? 0, json: JSON.parse(text) }))
              }
            )
            request.on("error", reject)
            request.write(marker)
            createReadStream(source, { highWaterMark: 256 * 1024 }).pipe(request)
          })
          if (answer.status !== 201) throw new Error(`upload failed: ${JSON.stringify(answer.json)}`)
          const { handle } = answer.json
          await rpc({ operation: op("Attachment", "add"), input: { projectId: project.output.id, file: handle }, invocationId: v7() })
          objectId = answer.json.objectId
        })
      )
      download = Math.min(
        download,
        await timed(async () => {
          const to = join(dir, `download-${round}.bin`)
          const response = await new Promise<IncomingMessage>((resolve, reject) =>
            httpGet(`${base}/db/objects/${objectId}`, { headers: { authorization: `Bearer ${token}` } }, resolve).on("error", reject)
          )
          if (response.statusCode !== 200) throw new Error(`download failed: ${response.statusCode}`)
          await pipeline(response, createWriteStream(to))
          fsyncPath(to)
          rmSync(to)
        })
      )
    }
    const mib = SIZE / (1024 * 1024)
    console.log(
      `objects: upload_ratio=${(raw / upload).toFixed(2)} download_ratio=${(raw / download).toFixed(2)} (${mib} MiB; raw copy ${(mib / (raw / 1000)).toFixed(0)} MiB/s, upload ${(mib / (upload / 1000)).toFixed(0)} MiB/s, download ${(mib / (download / 1000)).toFixed(0)} MiB/s)`
    )
  } finally {
    server.kill("SIGKILL")
    rmSync(dir, { recursive: true, force: true })
  }
}

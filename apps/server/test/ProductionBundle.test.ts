// `npm run start:prod`'s bundle (scripts/bundle.mjs, apps/server/dist/cairn.mjs): built here into a
// temporary directory next to the real one's siblings, started as plain `node` (no TypeScript
// loader), answers /health and an authenticated Describe.
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, describe, expect, it } from "vitest"
import { childToken, type Child } from "./support/child.js"
import { whenListening } from "./support/listening.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const dirs: Array<string> = []
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))

describe("the production bundle", () => {
  it("starts from compiled JS and serves /health, /db/rpc, resumable uploads and metrics", async () => {
    // Built beside the sources' dist so `../web/` resolves as it does for apps/server/dist/cairn.mjs.
    const outdir = mkdtempSync(join(root, "apps", "server", ".bundle-test-"))
    const dataDir = mkdtempSync(join(tmpdir(), "cairn-bundle-"))
    dirs.push(outdir, dataDir)
    const { bundle } = (await import(join(root, "scripts", "bundle.mjs"))) as { bundle: (o: { outdir: string }) => Promise<unknown> }
    await bundle({ outdir })
    const port = await freePort()
    const metricsPort = await freePort()
    const issuer = `http://127.0.0.1:${await freePort()}`
    const child = spawn(process.execPath, [join(outdir, "cairn.mjs")], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_OPTIONS: "", CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_STAGE: "test", CAIRN_DEV_ISSUER_URL: issuer, CAIRN_METRICS_PORT: String(metricsPort) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
    try {
      await whenListening(child, "bundle")
      const base = `http://127.0.0.1:${port}`
      expect((await fetch(`${base}/health`)).status).toBe(200)
      const server: Child = { child, base, port, issuer, dataDir, output: () => "", exited }
      const token = await childToken(server, { sub: "alice", org: "acme" })
      const response = await fetch(`${base}/db/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ _tag: "Request", id: "1", tag: "Describe", headers: [], payload: { browse: { kinds: ["entity"] } } })
      })
      expect(response.status).toBe(200)
      const body = (await response.json()) as ReadonlyArray<{ readonly exit: { readonly _tag: string } }>
      expect(body[0]!.exit._tag).toBe("Success")
      // What the bundle loads lazily, from its chunks: tus (a resumable upload is created) and the metrics SDK.
      const creation = await fetch(`${base}/db/objects/resumable`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "tus-resumable": "1.0.0", "upload-length": "5", "upload-metadata": `filename ${Buffer.from("a.txt").toString("base64")}` }
      })
      expect(creation.status).toBe(201)
      const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      expect(scrape.status).toBe(200)
      expect(await scrape.text()).toMatch(/^cairn_http_requests_total\{/m)
    } finally {
      child.kill("SIGKILL")
      await exited
    }
  }, 120_000)
})

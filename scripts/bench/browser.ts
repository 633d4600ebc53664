/**
 * `npm run bench -- browser`: the demo page in the system Chromium (playwright-core), signed in
 * through the development authorization server, against the real App (`npm start`'s routes plus
 * the demo page). 50 tasks are committed one at a time through `/db/rpc`; each is timed from its
 * commit (the receipt's `committedAt`) to its row rendered in the page (a MutationObserver's
 * clock, the same machine's): `browser: p50_ms=.. p99_ms=..`. The baseline, on the same commits,
 * is the Node sync client's live query (SQLite file): `browser-baseline: node_p50_ms=.. ratio_p50=..`.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { ConfigProvider, Context, Effect, Layer, Logger, LogLevel, Stream } from "effect"
import { CairnClient } from "@cairn/client/CairnClient"
import { newInvocationId } from "@cairn/client/InvocationId"
import { SyncClient } from "@cairn/client/SyncClient"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { App } from "@cairn/server-app/App"
import { DemoPage } from "@cairn/server-app/DemoPage"
import { freePort } from "@cairn/testkit/freePort"
import { trackerDeployment } from "@cairn/tracker/application"

const COMMITS = 50
const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!
const chromiumPath = [process.env["CHROMIUM_PATH"], "/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => p && existsSync(p))

const bench = Effect.gen(function* () {
  const port = yield* freePort()
  const base = `http://127.0.0.1:${port}`
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-browser-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))
  const settings = onLoopback({ port, dataDir })
  const env = ConfigProvider.fromMap(new Map([["CAIRN_DEV_ISSUER_URL", `http://127.0.0.1:${yield* freePort()}`]]))
  yield* Layer.build(
    App(trackerDeployment, DemoPage).pipe(
      Layer.provide(Settings.layer(settings)),
      Layer.provide(Layer.setConfigProvider(env)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings), Effect.withConfigProvider(env), Effect.orDie)
  const token = yield* signDevToken(dev, {
    subject: "alice",
    audience: `${base}/db`,
    claims: { org: "acme", roles: ["admin"] },
    scope: accessScopes.join(" "),
    ttlSeconds: 3600
  })
  const client = Context.get(yield* Layer.build(CairnClient.layerFetch({ baseUrl: base, token })), CairnClient)
  const op = (entity: string, name: string) => ({ kind: "operation" as const, owner: { kind: "entity" as const, name: entity }, name })
  const project = yield* Effect.orDie(client.mutate({ operation: op("Project", "create"), input: { name: "Bench" }, invocationId: newInvocationId() }))
  const projectId = (project.output as { id: string }).id

  // The baseline: the Node sync client's live query, on the same commits.
  const nodeSeen = new Map<string, number>()
  const rpc = yield* SyncClient.http({ url: `${base}/db/sync`, token: Effect.succeed(token) })
  const node = yield* SyncClient.make({ file: join(dataDir, "node-client.sqlite"), scope: { entities: [{ from: { kind: "entity", name: "Task" } }] }, rpc })
  yield* Effect.forkScoped(node.run)
  yield* Effect.forkScoped(
    Stream.runForEach(node.live("Task"), (rows) =>
      Effect.sync(() => {
        const now = Date.now()
        for (const r of rows) if (!nodeSeen.has(String(r.record["title"]))) nodeSeen.set(String(r.record["title"]), now)
      })
    )
  )

  const browser = yield* Effect.acquireRelease(
    Effect.promise(() => chromium.launch({ executablePath: chromiumPath!, args: ["--no-sandbox", "--disable-dev-shm-usage"] })),
    (b) => Effect.promise(() => b.close())
  )
  const page = yield* Effect.promise(() => browser.newPage())
  yield* Effect.promise(async () => {
    await page.goto(`${base}/`)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByLabel("Subject (sub)").fill("alice")
    await page.getByLabel("Organization (org: selects the database)").fill("acme")
    await page.getByLabel("Roles (space separated, e.g. admin)").fill("admin")
    await page.getByRole("button", { name: "Sign in and allow" }).click()
    await page.waitForURL(`${base}/`)
    await page.locator("#projects li", { hasText: "Bench" }).waitFor()
    await page.locator('body[data-confirmed="true"]').waitFor()
    await page.evaluate(() => {
      const seen: Record<string, number> = {}
      ;(window as unknown as { __seen: Record<string, number> }).__seen = seen
      new MutationObserver(() => {
        const now = Date.now()
        for (const li of document.querySelectorAll<HTMLElement>('#tasks li[data-pending="false"]')) {
          const title = li.querySelector(".title")?.textContent ?? ""
          if (!(title in seen)) seen[title] = now
        }
      }).observe(document.getElementById("tasks")!, { childList: true, subtree: true })
    })
  })

  const browserMs: Array<number> = []
  const nodeMs: Array<number> = []
  for (let i = 0; i < COMMITS; i++) {
    const title = `bench ${i}`
    const receipt = yield* Effect.orDie(client.mutate({ operation: op("Task", "create"), input: { projectId, title }, invocationId: newInvocationId() }))
    const committed = Date.parse(receipt.committedAt)
    const seen = yield* Effect.promise(() =>
      page.waitForFunction((t) => (window as unknown as { __seen: Record<string, number> }).__seen[t], title, { polling: 5 }).then((h) => h.jsonValue() as Promise<number>)
    )
    browserMs.push(seen - committed)
    while (!nodeSeen.has(title)) yield* Effect.sleep("2 millis")
    nodeMs.push(nodeSeen.get(title)! - committed)
  }
  browserMs.sort((a, b) => a - b)
  nodeMs.sort((a, b) => a - b)
  const b50 = percentile(browserMs, 50)
  const n50 = percentile(nodeMs, 50)
  console.log(`browser: p50_ms=${b50} p99_ms=${percentile(browserMs, 99)}`)
  console.log(`browser-baseline: node_p50_ms=${n50} node_p99_ms=${percentile(nodeMs, 99)} ratio_p50=${(b50 / Math.max(1, n50)).toFixed(2)}`)
})

export const run = async () => {
  if (chromiumPath === undefined) {
    console.log("browser: skipped (no system Chromium; apt-get install chromium or set CHROMIUM_PATH)")
    return
  }
  await Effect.runPromise(Effect.scoped(bench))
}

// The demo page in a real Chromium against the real App (`npm start`'s routes plus the demo page):
// sign-in with authorization code + PKCE, live convergence between two users, the local IndexedDB
// copy across reloads, optimistic mutations that survive a reload and commit once, and tabs
// sharing one store. Bounds are stated where a test waits for another browser to converge.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { DemoPage } from "../src/DemoPage.js"
import { chromiumPath, launch, newContext, screenshotPath, signIn, skipReason, watchErrors } from "./support/browser.js"
import { startApp } from "./support/app.js"
import { existsSync } from "node:fs"
import type { Request } from "playwright-core"
import { CairnClient } from "@cairn/client/CairnClient"
import { newInvocationId } from "@cairn/client/InvocationId"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { trackerWithRemoval } from "./support/trackerWithRemoval.js"

/** How long another browser may take to show a commit (generous: a shared 2-core machine). */
const convergeMs = 15_000

if (chromiumPath === undefined) console.warn(skipReason)

describe("the demo page's routes", () => {
  it.scopedLive("serve static files with a strict CSP, give no CORS grant, and leave the /db and /mcp gates as they were", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const get = (path: string, init: RequestInit = {}) => Effect.promise(() => fetch(`${app.base}${path}`, init))
      const page = yield* get("/", { headers: { origin: "https://elsewhere.example" } })
      assert.strictEqual(page.status, 200)
      assert.match(page.headers.get("content-type") ?? "", /^text\/html/)
      const csp = page.headers.get("content-security-policy") ?? ""
      assert.include(csp, "default-src 'self'")
      assert.include(csp, "script-src 'self'")
      assert.include(csp, "frame-ancestors 'none'")
      assert.include(csp, `connect-src 'self' ${app.issuer}`)
      assert.strictEqual(page.headers.get("x-content-type-options"), "nosniff")
      assert.strictEqual(page.headers.get("referrer-policy"), "no-referrer")
      assert.isNull(page.headers.get("access-control-allow-origin"))
      const script = yield* get("/demo.js")
      assert.strictEqual(script.status, 200)
      assert.match(script.headers.get("content-type") ?? "", /^text\/javascript/)
      const config = (yield* Effect.promise(() => fetch(`${app.base}/demo-config.json`).then((r) => r.json()))) as Record<string, unknown>
      assert.deepInclude(config, { clientId: "cairn-demo", resource: `${app.base}/db`, tokenEndpoint: `${app.issuer}/token` })
      // The gates answer anonymous callers exactly as without the page.
      for (const path of ["/db/rpc", "/db/sync", "/db/anything", "/mcp"]) {
        const answer = yield* get(path, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
        assert.strictEqual(answer.status, 401, path)
      }
      assert.strictEqual((yield* get("/index.html")).status, 404)
      assert.strictEqual((yield* get("/web/demo.ts")).status, 404)
    }))
})

describe.skipIf(chromiumPath === undefined)("the demo page in Chromium", () => {
  it.scopedLive("two users sign in with PKCE and see each other's tasks appear live; the page has no console errors", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const alice = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      const bob = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      const errors = [...watchErrors(alice), ...watchErrors(bob)]
      yield* Effect.promise(async () => {
        await signIn(alice, app.base, { sub: "alice", org: "acme", roles: "admin" })
        await signIn(bob, app.base, { sub: "bob", org: "acme", roles: "admin" })
        await alice.getByLabel("New project name").fill("Launch")
        await alice.getByRole("button", { name: "Create project" }).click()
        await alice.locator('#projects li[data-pending="false"]', { hasText: "Launch" }).waitFor({ timeout: convergeMs })
        await alice.getByLabel("New task title").fill("Write the announcement")
        await alice.getByRole("button", { name: "Add task" }).click()
        // Shown at once from the outbox, before the server answers.
        await alice.locator("#tasks li", { hasText: "Write the announcement" }).waitFor({ timeout: 2_000 })
        await bob.locator("#tasks li", { hasText: "Write the announcement" }).waitFor({ timeout: convergeMs })
        // Bob completes it; Alice sees it done.
        await bob.getByLabel("Done: Write the announcement").check()
        await alice.locator('#tasks li[data-status="done"][data-pending="false"]', { hasText: "Write the announcement" }).waitFor({ timeout: convergeMs })
        await alice.screenshot({ path: screenshotPath("demo"), fullPage: true })
      })
      assert.isTrue(existsSync(screenshotPath("demo")))
      assert.deepStrictEqual(errors, [])
    }))

  it.scopedLive("a reload renders the local copy before the network answers; a pending mutation survives it and commits once", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const page = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      const errors = watchErrors(page)
      const sent: Array<string> = []
      const count = yield* Effect.promise(async () => {
        await signIn(page, app.base, { sub: "alice", org: "acme", roles: "admin" })
        await page.getByLabel("New project name").fill("Offline")
        await page.getByRole("button", { name: "Create project" }).click()
        await page.locator('#projects li[data-pending="false"]', { hasText: "Offline" }).waitFor({ timeout: convergeMs })
        await page.getByLabel("New task title").fill("Synced before")
        await page.getByRole("button", { name: "Add task" }).click()
        await page.locator('#tasks li[data-pending="false"]', { hasText: "Synced before" }).waitFor({ timeout: convergeMs })

        // The sync stream never answers: the list still comes back, from IndexedDB.
        await page.route("**/db/sync", () => undefined)
        await page.reload()
        await page.locator('#tasks li[data-pending="false"]', { hasText: "Synced before" }).waitFor({ timeout: convergeMs })
        assert.strictEqual(await page.locator("body").getAttribute("data-confirmed"), "false")
        await page.unroute("**/db/sync")
        // Back online, the leader resumes from the stored cursor: changes only, no new snapshot.
        const syncCalls: Array<string> = []
        const record = (request: Request) => {
          if (request.url().endsWith("/db/sync")) syncCalls.push(request.postData() ?? "")
        }
        page.on("request", record)
        await page.reload()
        await page.locator('body[data-confirmed="true"]').waitFor({ timeout: convergeMs })
        page.off("request", record)
        assert.isTrue(syncCalls.some((body) => body.includes('"SyncChanges"')))
        assert.isFalse(syncCalls.some((body) => body.includes('"SyncSnapshot"')), "resumed without a snapshot")

        // Mutations reach the server and commit, but their answers are lost.
        await page.route("**/db/rpc", async (route) => {
          const body = route.request().postData() ?? ""
          const id = /"invocationId":"([^"]+)"/.exec(body)?.[1]
          if (id !== undefined) sent.push(id)
          await route.fetch()
          // Unrouting meanwhile lets the request go on: then there is nothing left to abort.
          await route.abort("connectionreset").catch(() => undefined)
        })
        await page.getByLabel("New task title").fill("Survives reload")
        await page.getByRole("button", { name: "Add task" }).click()
        await page.locator('#tasks li[data-pending="true"]', { hasText: "Survives reload" }).waitFor({ timeout: 2_000 })
        while (sent.length === 0) await new Promise((r) => setTimeout(r, 50))
        await page.reload()
        // Still pending after the reload, from the outbox; then resent with the same invocationId.
        await page.locator('#tasks li[data-pending="true"]', { hasText: "Survives reload" }).waitFor({ timeout: convergeMs })
        const before = sent.length
        while (sent.length === before) await new Promise((r) => setTimeout(r, 50))
        await page.unroute("**/db/rpc")
        await page.locator('#tasks li[data-pending="false"]', { hasText: "Survives reload" }).waitFor({ timeout: convergeMs })
        await page.locator('#tasks li[data-pending="true"]').waitFor({ state: "detached", timeout: convergeMs })
        return page.locator("#tasks li", { hasText: "Survives reload" }).count()
      })
      assert.isAtLeast(sent.length, 2)
      assert.deepStrictEqual(new Set(sent).size, 1, "every send carried the same invocationId")
      assert.strictEqual(count, 1)
      // Committed exactly once: the server holds one such task.
      const token = yield* app.token({ sub: "alice", org: "acme", roles: ["admin"] })
      const rows = yield* app.as(token)(
        Effect.flatMap(CairnClient, (client) =>
          client.query({
            query: {
              version: 1,
              from: { kind: "entity", name: "Task" },
              where: { op: "eq", path: ["title"], value: "Survives reload" },
              select: { id: { path: ["id"] } }
            }
          })
        )
      )
      assert.strictEqual(rows.rows.length, 1)
      assert.deepStrictEqual(errors.filter((e) => !e.includes("Failed to load resource")), [])
    }))

  it.scopedLive("tabs share one store: one leads the sync, the other reads the same copy, and takes over when the leader closes", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const context = yield* newContext(browser)
      const first = yield* Effect.promise(() => context.newPage())
      const errors = watchErrors(first)
      yield* Effect.promise(async () => {
        await signIn(first, app.base, { sub: "alice", org: "acme", roles: "admin" })
        await first.locator('body[data-role="leader"]').waitFor({ timeout: convergeMs })
        await first.getByLabel("New project name").fill("Shared")
        await first.getByRole("button", { name: "Create project" }).click()
        await first.locator('#projects li[data-pending="false"]', { hasText: "Shared" }).waitFor({ timeout: convergeMs })
      })
      const second = yield* Effect.promise(() => context.newPage())
      errors.push(...watchErrors(second))
      const network: Array<string> = []
      second.on("request", (request) => {
        if (new URL(request.url()).pathname.startsWith("/db/")) network.push(request.url())
      })
      yield* Effect.promise(async () => {
        await second.goto(`${app.base}/`)
        await second.locator('body[data-role="follower"]').waitFor({ timeout: convergeMs })
        await second.locator("#projects li", { hasText: "Shared" }).waitFor({ timeout: convergeMs })
        // Created in the follower: the leader sends it, syncs it, and both tabs show it committed.
        await second.getByLabel("New task title").fill("From the second tab")
        await second.getByRole("button", { name: "Add task" }).click()
        await first.locator('#tasks li[data-pending="false"]', { hasText: "From the second tab" }).waitFor({ timeout: convergeMs })
        await second.locator('#tasks li[data-pending="false"]', { hasText: "From the second tab" }).waitFor({ timeout: convergeMs })
      })
      assert.deepStrictEqual(network, [], "the follower tab never called /db/*")
      yield* Effect.promise(async () => {
        await first.close()
        await second.locator('body[data-role="leader"]').waitFor({ timeout: convergeMs })
        await second.locator('body[data-confirmed="true"]').waitFor({ timeout: convergeMs })
      })
      assert.deepStrictEqual(errors, [])
    }))

  it.scopedLive("a mutation the server rejects is rolled back with its public reason", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const alice = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      const bob = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      yield* Effect.promise(async () => {
        await signIn(alice, app.base, { sub: "alice", org: "acme", roles: "admin" })
        await signIn(bob, app.base, { sub: "bob", org: "acme", roles: "admin" })
        await alice.getByLabel("New project name").fill("Race")
        await alice.getByRole("button", { name: "Create project" }).click()
        await alice.locator('#projects li[data-pending="false"]', { hasText: "Race" }).waitFor({ timeout: convergeMs })
        await alice.getByLabel("New task title").fill("Contested")
        await alice.getByRole("button", { name: "Add task" }).click()
        await bob.locator('#tasks li[data-pending="false"]', { hasText: "Contested" }).waitFor({ timeout: convergeMs })
        await alice.locator('#tasks li[data-pending="false"]', { hasText: "Contested" }).waitFor({ timeout: convergeMs })
        // Alice is cut off; she completes the task while Bob completes it too.
        await alice.route("**/db/*", (route) => route.abort("internetdisconnected"))
        await alice.getByLabel("Done: Contested").check()
        await alice.locator('#tasks li[data-pending="true"][data-status="done"]', { hasText: "Contested" }).waitFor({ timeout: 2_000 })
        await bob.getByLabel("Done: Contested").check()
        await bob.locator('#tasks li[data-pending="false"][data-status="done"]', { hasText: "Contested" }).waitFor({ timeout: convergeMs })
        await alice.unroute("**/db/*")
        await alice.getByRole("alert").getByText(/Not saved: .*already done/i).waitFor({ timeout: convergeMs })
        await alice.locator('#tasks li[data-pending="false"][data-status="done"]', { hasText: "Contested" }).waitFor({ timeout: convergeMs })
      })
    }))

  it.scopedLive("a revoked membership removes the project's rows from the page and from the browser's store", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage, deployment: trackerWithRemoval })
      const browser = yield* launch
      const admin = yield* app.token({ sub: "alice", org: "acme", roles: ["admin"] })
      const mutate = (request: typeof MutateRequest.Encoded) => app.as(admin)(Effect.flatMap(CairnClient, (client) => client.mutate(request)))
      const op = (entity: string, name: string) => ({ kind: "operation" as const, owner: { kind: "entity" as const, name: entity }, name })
      const project = yield* mutate({ operation: op("Project", "create"), input: { name: "Secret" }, invocationId: newInvocationId() })
      const projectId = (project.output as { id: string }).id
      yield* mutate({ operation: op("Task", "create"), input: { projectId, title: "Hidden soon" }, invocationId: newInvocationId() })
      const member = yield* mutate({
        operation: op("Member", "add"),
        input: { projectId, subject: "carol", role: "editor", email: "carol@example.com" },
        invocationId: newInvocationId()
      })
      const memberId = (member.output as { id: string }).id
      const carol = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      const errors = watchErrors(carol)
      yield* Effect.promise(async () => {
        await signIn(carol, app.base, { sub: "carol", org: "acme" })
        await carol.locator("#tasks li", { hasText: "Hidden soon" }).waitFor({ timeout: convergeMs })
      })
      const revoked = yield* mutate({ operation: op("Member", "remove"), target: { kind: "entity", entity: "Member", id: memberId }, input: {}, invocationId: newInvocationId() })
      assert.strictEqual(revoked.outcome, "committed")
      const stored = yield* Effect.promise(async () => {
        await carol.locator("#projects li").first().waitFor({ state: "detached", timeout: convergeMs })
        await carol.locator("#tasks li").first().waitFor({ state: "detached", timeout: convergeMs })
        await carol.locator('body[data-confirmed="true"]').waitFor({ timeout: convergeMs })
        return carol.evaluate(
          () =>
            new Promise<number>((resolve, reject) => {
              const open = indexedDB.open("cairn-demo")
              open.onsuccess = () => {
                const count = open.result.transaction("records").objectStore("records").count()
                count.onsuccess = () => resolve(count.result)
                count.onerror = () => reject(count.error)
              }
              open.onerror = () => reject(open.error)
            })
        )
      })
      assert.strictEqual(stored, 0)
      assert.deepStrictEqual(errors, [])
    }))

  it.scopedLive("the local copy of one sign-in is never shown to the next one in the same browser, and is replaced by theirs", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const context = yield* newContext(browser)
      const page = yield* Effect.promise(() => context.newPage())
      const errors = watchErrors(page)
      const shown = yield* Effect.promise(async () => {
        await signIn(page, app.base, { sub: "alice", org: "acme" })
        await page.getByLabel("New project name").fill("Alice only")
        await page.getByRole("button", { name: "Create project" }).click()
        await page.locator('#projects li[data-pending="false"]', { hasText: "Alice only" }).waitFor({ timeout: convergeMs })
        // From now on, every document records each project name it ever renders.
        await page.addInitScript(() => {
          const seen: Array<string> = []
          ;(window as unknown as { __shown: Array<string> }).__shown = seen
          document.addEventListener("DOMContentLoaded", () => {
            const projects = document.getElementById("projects")
            if (projects === null) return // the authorization server's pages
            new MutationObserver(() => {
              for (const li of projects.querySelectorAll("li")) seen.push(li.textContent ?? "")
            }).observe(projects, { childList: true, subtree: true })
          })
        })
        await page.getByRole("button", { name: "Sign out" }).click()
        await signIn(page, app.base, { sub: "bob", org: "acme" })
        await page.getByLabel("New project name").fill("Bob only")
        await page.getByRole("button", { name: "Create project" }).click()
        await page.locator('#projects li[data-pending="false"]', { hasText: "Bob only" }).waitFor({ timeout: convergeMs })
        return page.evaluate(() => (window as unknown as { __shown: Array<string> }).__shown)
      })
      assert.isTrue(shown.some((name) => name.includes("Bob only")))
      assert.isFalse(shown.some((name) => name.includes("Alice only")), "alice's project was never rendered for bob")
      const stored = yield* Effect.promise(() =>
        page.evaluate(
          () =>
            new Promise<Array<string>>((resolve) => {
              const open = indexedDB.open("cairn-demo")
              open.onsuccess = () => {
                const all = open.result.transaction("records").objectStore("records").getAll()
                all.onsuccess = () => resolve(all.result.map((r: { record: { name?: string } }) => String(r.record.name ?? "")))
              }
            })
        )
      )
      assert.deepStrictEqual(stored.filter((n) => n !== ""), ["Bob only"])
      assert.deepStrictEqual(errors, [])
    }))

  it.scopedLive("a refused token stops the sync and the page says to sign in again, still showing the local copy", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ pages: DemoPage })
      const browser = yield* launch
      const page = yield* Effect.flatMap(newContext(browser), (c) => Effect.promise(() => c.newPage()))
      yield* Effect.promise(async () => {
        await signIn(page, app.base, { sub: "alice", org: "acme" })
        await page.getByLabel("New project name").fill("Kept")
        await page.getByRole("button", { name: "Create project" }).click()
        await page.locator('#projects li[data-pending="false"]', { hasText: "Kept" }).waitFor({ timeout: convergeMs })
        // The stored token no longer verifies (as after a key rotation).
        await page.evaluate(() => {
          const session = JSON.parse(localStorage.getItem("cairn-demo-session")!)
          localStorage.setItem("cairn-demo-session", JSON.stringify({ ...session, token: `${session.token.slice(0, -4)}AAAA` }))
        })
        await page.reload()
        await page.getByRole("status").getByText(/Sync stopped .*Sign out and sign in again/).waitFor({ timeout: convergeMs })
        await page.locator("#projects li", { hasText: "Kept" }).waitFor({ timeout: convergeMs })
      })
    }))
})

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

/** How long another browser may take to show a commit (generous: a shared 2-core machine). */
const convergeMs = 15_000

if (chromiumPath === undefined) console.warn(skipReason)

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
})

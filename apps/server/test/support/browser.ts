// The system Chromium driven by playwright-core (no downloaded browsers), and the demo page's
// sign-in through the development authorization server, as a person would do it.
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { Effect, type Scope } from "effect"

const candidates = [process.env["CHROMIUM_PATH"], "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]

/** The Chromium to drive, or undefined when none is installed (the browser tests then skip). */
export const chromiumPath: string | undefined = candidates.find((p): p is string => p !== undefined && p !== "" && existsSync(p))

export const skipReason = "no system Chromium (apt-get install chromium, or set CHROMIUM_PATH): browser tests skipped"

/** Where screenshots go: the test run's output directory. */
export const outputDir = (() => {
  const dir = fileURLToPath(new URL("../../../../.tmp/browser", import.meta.url))
  mkdirSync(dir, { recursive: true })
  return dir
})()

export const screenshotPath = (name: string) => join(outputDir, `${name}.png`)

export const launch: Effect.Effect<Browser, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: chromiumPath!, args: ["--no-sandbox", "--disable-dev-shm-usage"] })),
  (browser) => Effect.promise(() => browser.close())
)

export const newContext = (browser: Browser): Effect.Effect<BrowserContext, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => browser.newContext()),
    (context) => Effect.promise(() => context.close())
  )

/** Console errors and uncaught exceptions of a page: the demo must have none. */
export const watchErrors = (page: Page): Array<string> => {
  const errors: Array<string> = []
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(`${message.text()} (${message.location().url})`)
  })
  page.on("pageerror", (error) => errors.push(error.message))
  page.on("response", (response) => {
    if (response.status() >= 400) errors.push(`HTTP ${response.status()} ${response.request().method()} ${response.url()}`)
  })
  return errors
}

/** Opens the demo page and signs in on the development login page as `who`. */
export const signIn = async (page: Page, base: string, who: { sub: string; org: string; roles?: string }) => {
  await page.goto(`${base}/`)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByLabel("Subject (sub)").fill(who.sub)
  await page.getByLabel("Organization (org: selects the database)").fill(who.org)
  await page.getByLabel("Roles (space separated, e.g. admin)").fill(who.roles ?? "")
  await page.getByRole("button", { name: "Sign in and allow" }).click()
  await page.waitForURL(`${base}/`)
  await page.getByText(`Signed in as ${who.sub}`).waitFor()
}

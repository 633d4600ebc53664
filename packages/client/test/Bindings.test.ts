// The checked-in bindings cannot rot: `npm run bindings` regenerates them from the compiled
// tracker catalog, and `--check` fails when the file on disk differs from what it would write.
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const checkedIn = join(root, "packages/client/src/generated/tracker.ts")

const bindings = (...args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stderr: string }>((resolve) =>
    execFile(process.execPath, ["--import", "tsx", "scripts/bindings.ts", ...args], { cwd: root }, (error, _stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stderr })
    )
  )

describe("npm run bindings", () => {
  it("regenerates exactly the checked-in tracker bindings", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "cairn-bindings-")), "tracker.ts")
    expect((await bindings("--out", out)).code).toBe(0)
    expect(readFileSync(out, "utf8")).toBe(readFileSync(checkedIn, "utf8"))
    expect((await bindings("--check")).code).toBe(0)
  })

  it("--check fails on a stale file and names the fix", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "cairn-bindings-")), "tracker.ts")
    writeFileSync(out, readFileSync(checkedIn, "utf8").replace("readonly title: string", "readonly title: number"))
    const stale = await bindings("--check", "--out", out)
    expect(stale.code).toBe(1)
    expect(stale.stderr).toContain("run `npm run bindings`")
  })
})

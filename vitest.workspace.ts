// Every workspace package with a test/ folder is a vitest project. Timeouts are generous
// because some tests start real servers and child processes on a shared 2-core machine;
// no test depends on wall-clock speed.
import { existsSync, readdirSync } from "node:fs"
import { defineWorkspace } from "vitest/config"

const roots = [
  ...readdirSync("packages").map((p) => `packages/${p}`),
  ...readdirSync("apps").map((p) => `apps/${p}`),
  "catalog",
  ...readdirSync("examples").map((p) => `examples/${p}`)
].filter((root) => existsSync(`${root}/test`))

export default defineWorkspace(
  roots.map((root) => ({
    test: {
      name: root,
      root,
      include: ["test/**/*.test.ts"],
      testTimeout: 120_000,
      hookTimeout: 120_000
    }
  }))
)

// Every workspace package with a test/ folder is a vitest project. Timeouts are generous
// because some tests start real servers and child processes on a shared 2-core machine;
// no test depends on wall-clock speed.
import { existsSync, readdirSync } from "node:fs"
import { defineWorkspace } from "vitest/config"

// Workspace packages resolve to their TypeScript sources through the "@cairn/source" export
// condition (their default condition is the published build in dist/). Child processes the tests
// spawn get the same condition from NODE_OPTIONS (.npmrc's node-options, set by npm and npx).
const conditions = ["@cairn/source", "module", "node", "development|production"]

const roots = [
  ...readdirSync("packages").map((p) => `packages/${p}`),
  ...readdirSync("apps").map((p) => `apps/${p}`),
  "catalog",
  ...readdirSync("examples").map((p) => `examples/${p}`)
].filter((root) => existsSync(`${root}/test`))

export default defineWorkspace(
  roots.map((root) => ({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name: root,
      root,
      include: ["test/**/*.test.ts"],
      testTimeout: 120_000,
      hookTimeout: 120_000
    }
  }))
)

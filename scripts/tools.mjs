#!/usr/bin/env node
// Installs the external tools the MCP interoperability tests run, each pinned and in its
// own prefix under .tools/ (never root dependencies: the `node@22` package would shadow
// Node 20 inside npm scripts and break better-sqlite3's native build). Runs before
// `npm test`; does nothing when the pinned versions are already there.
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Node 22 for the conformance CLI (it needs fs.globSync), the conformance suite, and the Inspector CLI. */
const tools = [
  { prefix: ".tools/node22", name: "node", version: "22.23.3" },
  { prefix: ".tools/conformance", name: "@modelcontextprotocol/conformance", version: "0.1.16" },
  { prefix: ".tools/inspector", name: "@modelcontextprotocol/inspector", version: "2.12.0" }
]

const installed = (tool) => {
  try {
    return JSON.parse(readFileSync(join(root, tool.prefix, "node_modules", tool.name, "package.json"), "utf8")).version
  } catch {
    return undefined
  }
}

for (const tool of tools) {
  if (installed(tool) === tool.version) continue
  console.log(`tools: installing ${tool.name}@${tool.version} into ${tool.prefix}`)
  const env = { ...process.env }
  // Settings npm passes to lifecycle scripts would point this install at the root project.
  for (const key of Object.keys(env)) if (key.startsWith("npm_") && key !== "npm_config_registry" && key !== "npm_config_cache") delete env[key]
  execFileSync("npm", ["install", "--prefix", tool.prefix, "--save-exact", "--no-audit", "--no-fund", `${tool.name}@${tool.version}`], {
    cwd: root,
    env,
    stdio: "inherit"
  })
  if (installed(tool) !== tool.version) {
    console.error(`tools: ${tool.name}@${tool.version} did not install into ${tool.prefix}`)
    process.exit(1)
  }
}

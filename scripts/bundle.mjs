#!/usr/bin/env node
/**
 * `npm run build`'s second step: bundles the production entry (`apps/server/src/main.ts`, from the
 * workspace sources through the `@cairn/source` condition) into one ESM file,
 * `apps/server/dist/cairn.mjs`, which `npm run start:prod` runs. Loading ~1,500 modules one by one
 * (the `effect` barrel, the MCP SDK, zod, ajv) was most of the start; one file parses in a fraction.
 * What is imported lazily stays lazy: dynamic imports become chunks next to the bundle
 * (`cairn-*.mjs`, so `import.meta.url`-relative lookups such as the demo page's `../web/` resolve
 * the same from every file). Native and tool packages stay external, resolved from node_modules.
 * `--sourcemap` writes source maps (`node --enable-source-maps apps/server/dist/cairn.mjs`).
 * Usable as a module: `bundle({ outdir })` (the production-bundle test builds its own copy).
 */
import { rmSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

/** Packages left to Node: native addons found by path (better-sqlite3), and the demo page's own bundler. */
export const externals = ["better-sqlite3", "esbuild", "fsevents"]

export const bundle = async ({ outdir = join(root, "apps", "server", "dist"), sourcemap = false } = {}) => {
  const esbuild = await import("esbuild")
  for (const old of (await import("node:fs")).readdirSync(outdir, { withFileTypes: true }).filter((f) => f.isFile() && /^cairn(-.*)?\.mjs(\.map)?$/.test(f.name))) {
    rmSync(join(outdir, old.name))
  }
  return esbuild.build({
    absWorkingDir: root,
    entryPoints: { cairn: join(root, "apps", "server", "src", "main.ts") },
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    conditions: ["@cairn/source"],
    outExtension: { ".js": ".mjs" },
    chunkNames: "cairn-[name]-[hash]",
    external: externals,
    sourcemap,
    legalComments: "none",
    logLevel: "warning",
    // CommonJS dependencies bundled into ESM still call require() for Node built-ins.
    banner: { js: 'import { createRequire as __cairnCreateRequire } from "node:module"; const require = __cairnCreateRequire(import.meta.url);' }
  })
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await bundle({ sourcemap: process.argv.includes("--sourcemap") })
}

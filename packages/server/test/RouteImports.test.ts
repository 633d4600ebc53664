// Transports are adapters: a route authenticates, calls the one engine (`DataPlane`) and maps its
// typed answer to its wire. Checked over the import graph of every route module (`*Routes.ts`,
// `*Gate.ts` of the server's `http/` folder and of the MCP package) and the transport-side modules they reach: none may
// import store, query, policy or sync, whose rules only the engine applies. The walk stops at the
// engine's own modules, which are the one place those packages are used.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")
const sources = [join(root, "packages/server/src/http"), join(root, "packages/mcp/src")]

/** The engine: the modules behind `DataPlane`, where store, query, policy and sync are used. */
const engine = new Set(["DataPlane.ts", "Objects.ts", "DatabasesLive.ts", "Deployment.ts", "EngineLimits.ts", "CatalogGuard.ts", "PolicyGuard.ts"])
const forbidden = /^@cairn\/(store|query|policy|sync)(\/|$)/

const importsOf = (file: string): ReadonlyArray<string> =>
  [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]!)

/** A relative or `@cairn/server` / `@cairn/mcp` import, as the file it names (if it is ours). */
const localFile = (from: string, specifier: string): string | undefined => {
  const own = /^@cairn\/(server|mcp)\/(.+)$/.exec(specifier)
  const path = own ? join(root, "packages", own[1]!, "src", `${own[2]}.ts`) : specifier.startsWith(".") ? resolve(dirname(from), specifier.replace(/\.js$/, ".ts")) : undefined
  return path !== undefined && existsSync(path) ? path : undefined
}

const routeModules = sources.flatMap((dir) => readdirSync(dir).filter((f) => /(Routes|Gate)\.ts$/.test(f)).map((f) => join(dir, f)))

describe("route modules import only the engine and contracts", () => {
  it("finds the routes it checks", () => {
    const names = routeModules.map((f) => f.slice(f.lastIndexOf("/") + 1))
    for (const route of ["RpcRoutes.ts", "SyncRoutes.ts", "DbRoutes.ts", "ObjectRoutes.ts", "McpRoutes.ts", "DbGate.ts", "BearerGate.ts"]) assert.include(names, route)
  })

  it("no route, nor any transport module it reaches, imports store, query, policy or sync", () => {
    const violations: Array<string> = []
    const seen = new Set<string>()
    const walk = (file: string, via: string) => {
      if (seen.has(file)) return
      seen.add(file)
      for (const specifier of importsOf(file)) {
        if (forbidden.test(specifier)) violations.push(`${via} → ${file.slice(root.length + 1)} imports ${specifier}`)
        const next = localFile(file, specifier)
        if (next !== undefined && !engine.has(next.slice(next.lastIndexOf("/") + 1))) walk(next, via)
      }
    }
    for (const route of routeModules) walk(route, route.slice(route.lastIndexOf("/") + 1))
    assert.deepStrictEqual(violations, [])
  })
})

describe("the server's folders import one way", () => {
  // operations ← engine ← auth ← http: no folder imports one that imports it (no cycles between them).
  const allowed: Readonly<Record<string, ReadonlyArray<string>>> = {
    operations: ["internal"],
    engine: ["operations", "internal"],
    auth: ["engine", "operations", "internal"],
    http: ["auth", "engine", "operations", "internal"]
  }
  it("each folder imports only the folders below it", () => {
    const src = join(root, "packages/server/src")
    const violations: Array<string> = []
    for (const [folder, below] of Object.entries(allowed)) {
      for (const file of readdirSync(join(src, folder)).filter((f) => f.endsWith(".ts"))) {
        for (const specifier of importsOf(join(src, folder, file))) {
          const other = /^\.\.\/([a-z]+)\//.exec(specifier)?.[1]
          if (other !== undefined && !below.includes(other)) violations.push(`${folder}/${file} imports ${specifier}`)
        }
      }
    }
    assert.deepStrictEqual(violations, [])
  })
})

// The packages as an outside application gets them: build, `npm pack` @cairn/domain and @cairn/client,
// install the tarballs with the pinned Effect 3 peers into a fresh project outside the workspace (offline,
// from the npm cache `npm ci` filled, at exactly the workspace lockfile's versions), type-check a program
// that uses the generated bindings with the workspace's TypeScript, run it with node against a running
// server, and bundle the root entry for the browser with esbuild. Every step fails the test on its own.
import { execFile, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { freePortPromise } from "@cairn/testkit/freePort"
import { startApp } from "./support/app.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const rootManifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  readonly dependencies: Record<string, string>
}

interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  Effect.async<Ran>((resume) => {
    const child = execFile(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }))
    )
    return Effect.sync(() => child.kill())
  })

/** Runs one step and fails the test, with the step's output, unless it exits 0. */
const step = (name: string, command: string, args: ReadonlyArray<string>, cwd: string, env?: NodeJS.ProcessEnv) =>
  Effect.tap(run(command, args, cwd, env), (ran) =>
    Effect.sync(() => assert.strictEqual(ran.code, 0, `${name} failed:\n${ran.stdout.slice(-4000)}\n${ran.stderr.slice(-4000)}`))
  )

/**
 * The environment of a process outside the workspace: nothing inherited from the npm running these tests
 * (`npm_*`), and no `NODE_OPTIONS` (the workspace's `@cairn/source` condition would point into sources the
 * tarballs do not ship).
 */
const outsideEnv = (cache: string): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && key !== "NODE_OPTIONS")),
  npm_config_cache: cache,
  npm_config_update_notifier: "false"
})

interface LockEntry {
  readonly version?: string
  readonly resolved?: string
  readonly integrity?: string
  readonly link?: boolean
  readonly dependencies?: Record<string, string>
  readonly optionalDependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>
  readonly [key: string]: unknown
}

interface Packed {
  readonly name: string
  readonly version: string
  readonly filename: string
  readonly integrity: string
  readonly files: ReadonlyArray<{ readonly path: string }>
}

/**
 * A lockfile for the consumer: the tarballs, plus every package they and `direct` reach, copied from the
 * workspace's lockfile at the same place in the tree (the subset of a valid tree reachable from its root is
 * valid), with the registry URL npm would record. So `npm ci --offline` installs exactly the versions the
 * workspace runs, from the cache, and a missing one fails the step instead of drifting.
 */
const consumerLock = (
  workspaceLock: { readonly packages: Record<string, LockEntry> },
  registry: string,
  packed: ReadonlyArray<Packed>,
  direct: Record<string, string>
) => {
  const source = workspaceLock.packages
  const out: Record<string, LockEntry> = {}
  const locate = (from: string, name: string): string | undefined => {
    for (let base = from; ; ) {
      const candidate = `${base === "" ? "" : `${base}/`}node_modules/${name}`
      if (source[candidate] !== undefined && source[candidate].link !== true) return candidate
      if (base === "") return undefined
      const parent = base.lastIndexOf("/node_modules/")
      base = parent < 0 ? "" : base.slice(0, parent)
    }
  }
  const visit = (from: string, entry: LockEntry) => {
    const edges: Array<[string, boolean]> = [
      ...Object.keys(entry.dependencies ?? {}).map((n): [string, boolean] => [n, false]),
      ...Object.keys(entry.optionalDependencies ?? {}).map((n): [string, boolean] => [n, true]),
      ...Object.keys(entry.peerDependencies ?? {}).map((n): [string, boolean] => [n, entry.peerDependenciesMeta?.[n]?.optional === true])
    ]
    for (const [name, optional] of edges) {
      if (name.startsWith("@cairn/")) continue
      const at = locate(from, name)
      if (at === undefined) {
        if (optional) continue
        throw new Error(`${name} (needed by ${from || "the consumer"}) is not in the workspace lockfile`)
      }
      if (out[at] !== undefined) continue
      const { dev: _dev, devOptional: _devOptional, peer: _peer, ...kept } = source[at]!
      const unscoped = name.split("/").pop()!
      out[at] = { ...kept, resolved: `${registry}${name}/-/${unscoped}-${kept.version}.tgz` }
      visit(at, source[at]!)
    }
  }
  for (const tarball of packed) {
    const manifest = JSON.parse(readFileSync(join(root, "packages", tarball.name.slice("@cairn/".length), "package.json"), "utf8"))
    const entry: LockEntry = {
      version: tarball.version,
      resolved: `file:${tarball.filename}`,
      integrity: tarball.integrity,
      ...(manifest.dependencies ? { dependencies: manifest.dependencies } : {}),
      ...(manifest.peerDependencies ? { peerDependencies: manifest.peerDependencies } : {}),
      ...(manifest.peerDependenciesMeta ? { peerDependenciesMeta: manifest.peerDependenciesMeta } : {})
    }
    out[`node_modules/${tarball.name}`] = entry
    visit("", entry)
  }
  visit("", { dependencies: direct })
  const dependencies = { ...Object.fromEntries(packed.map((p) => [p.name, `file:${p.filename}`])), ...direct }
  return {
    manifest: { name: "cairn-consumer", version: "0.0.0", private: true, type: "module", dependencies },
    lock: {
      name: "cairn-consumer",
      version: "0.0.0",
      lockfileVersion: 3,
      requires: true,
      packages: { "": { name: "cairn-consumer", version: "0.0.0", dependencies }, ...out }
    }
  }
}

const program = (baseUrl: string, token: string) => `
import { InvocationId } from "@cairn/client"
import { CairnClient } from "@cairn/client/CairnClient"
import { tracker } from "@cairn/client/generated/tracker"
import { Effect } from "effect"

// @ts-expect-error the bindings are typed: a Project is created from a name, not a title
export const mistyped = tracker.Project.create({ input: { title: "Apollo" } })

const main = Effect.gen(function* () {
  const client = yield* CairnClient
  const described = yield* client.describe({ browse: { kinds: ["entity"] } })
  const created = yield* tracker.Project.create({ input: { name: "Apollo" }, invocationId: InvocationId.newInvocationId() })
  const page = yield* tracker.Project.query({ select: { id: { path: ["id"] }, name: { path: ["name"] } } })
  const names: ReadonlyArray<string> = page.rows.map((row) => row.name)
  return {
    entities: described.cards.map((card) => card.ref).filter((ref) => ref.kind === "entity").map((ref) => ref.name),
    created: created.output.id,
    rows: page.rows,
    names
  }
})

Effect.runPromise(main.pipe(Effect.provide(CairnClient.layerFetch({ baseUrl: ${JSON.stringify(baseUrl)}, token: ${JSON.stringify(token)} })))).then(
  (result) => console.log(JSON.stringify(result))
)
`

const browserEntry = `
import { Bindings, CairnClient, InvocationId, TransportError } from "@cairn/client"
import { tracker } from "@cairn/client/generated/tracker"
export const app = { Bindings, CairnClient, InvocationId, TransportError, tracker }
`

const consumerTsconfig = {
  compilerOptions: {
    target: "ES2022",
    lib: ["ES2022", "DOM"],
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    types: [],
    rootDir: "src",
    outDir: "out"
  },
  include: ["src/main.ts"]
}

describe("the published packages", () => {
  it.scopedLive(
    "pack, install outside the workspace with the Effect 3 peers, type-check, run against a server, and bundle for the browser",
    () =>
      Effect.gen(function* () {
        const npm = process.platform === "win32" ? "npm.cmd" : "npm"
        const cache = (yield* step("npm config get cache", npm, ["config", "get", "cache"], root)).stdout.trim()
        const registry = (yield* step("npm config get registry", npm, ["config", "get", "registry"], root)).stdout.trim().replace(/\/?$/, "/")

        yield* step("npm run build", npm, ["run", "build"], root)

        // Production runs the compiled server with plain node: no tsx, no source condition.
        const prodPort = yield* Effect.promise(() => freePortPromise())
        const prodDir = mkdtempSync(join(tmpdir(), "cairn-prod-"))
        const production = spawn(process.execPath, ["apps/server/dist/main.js"], {
          cwd: root,
          env: { ...process.env, NODE_OPTIONS: "", CAIRN_PORT: String(prodPort), CAIRN_DATA_DIR: prodDir, CAIRN_STAGE: "test" },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let productionOutput = ""
        production.stdout.on("data", (d) => (productionOutput += d))
        production.stderr.on("data", (d) => (productionOutput += d))
        yield* Effect.addFinalizer(() => Effect.sync(() => production.kill("SIGKILL")))
        const healthy = yield* Effect.promise(async () => {
          for (let i = 0; i < 300; i++) {
            try {
              if ((await fetch(`http://127.0.0.1:${prodPort}/health`)).ok) return true
            } catch {
              // not listening yet
            }
            if (production.exitCode !== null) return false
            await new Promise((r) => setTimeout(r, 100))
          }
          return false
        })
        assert.isTrue(healthy, `the compiled server did not become healthy:\n${productionOutput}`)
        assert.notInclude(productionOutput, "tsx")
        production.kill("SIGTERM")

        const consumer = mkdtempSync(join(tmpdir(), "cairn-consumer-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(consumer, { recursive: true, force: true })))
        const pack = yield* step(
          "npm pack",
          npm,
          ["pack", "--json", "--ignore-scripts", "-w", "@cairn/domain", "-w", "@cairn/client", "--pack-destination", consumer],
          root
        )
        const packed = JSON.parse(pack.stdout) as ReadonlyArray<Packed>
        assert.deepStrictEqual(packed.map((p) => p.name).sort(), ["@cairn/client", "@cairn/domain"])
        for (const tarball of packed) {
          const files = tarball.files.map((f) => f.path)
          assert.include(files, "dist/index.js", `${tarball.name} ships its build`)
          assert.include(files, "dist/index.d.ts", `${tarball.name} ships its types`)
          const stray = files.filter((f) => !(f === "package.json" || f === "README.md" || f.startsWith("dist/")) || f.endsWith(".tsbuildinfo"))
          assert.deepStrictEqual(stray, [], `${tarball.name} ships only its build`)
        }

        // What a user installs next to @cairn/client: the Effect 3 peers, pinned, and the optional peers of the
        // Node entry (`@cairn/client/node`), so the browser bundle below proves the root entry does not reach them.
        const peers = ["effect", "@effect/platform", "@effect/rpc", "@effect/sql", "@effect/experimental", "@effect/sql-sqlite-node"]
        const direct = Object.fromEntries(peers.map((n) => [n, rootManifest.dependencies[n]!]))
        const workspaceLock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"))
        const { lock, manifest } = consumerLock(workspaceLock, registry, packed, direct)
        writeFileSync(join(consumer, "package.json"), JSON.stringify(manifest, null, 2))
        writeFileSync(join(consumer, "package-lock.json"), JSON.stringify(lock, null, 2))
        const env = outsideEnv(cache)
        yield* step("npm ci --offline (consumer)", npm, ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund"], consumer, env)
        const installed = (name: string) => JSON.parse(readFileSync(join(consumer, "node_modules", name, "package.json"), "utf8")).version
        assert.strictEqual(installed("effect"), rootManifest.dependencies["effect"])
        assert.strictEqual(installed("@cairn/client"), "0.1.0")

        const app = yield* startApp()
        const token = yield* app.token({ sub: "alice", org: "acme" })
        mkdirSync(join(consumer, "src"))
        writeFileSync(join(consumer, "src", "main.ts"), program(app.base, token))
        writeFileSync(join(consumer, "src", "browser.ts"), browserEntry)
        writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify(consumerTsconfig, null, 2))

        yield* step("tsc (consumer)", process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", consumer], consumer, env)
        const ran = yield* step("node out/main.js (consumer)", process.execPath, [join(consumer, "out", "main.js")], consumer, env)
        const result = JSON.parse(ran.stdout) as { entities: Array<string>; created: string; rows: Array<unknown>; names: Array<string> }
        assert.includeMembers(result.entities, ["Project", "Task", "Member", "Comment"])
        assert.deepStrictEqual(result.rows, [{ id: result.created, name: "Apollo" }])
        assert.deepStrictEqual(result.names, ["Apollo"])

        const esbuild = join(root, "node_modules", ".bin", "esbuild")
        const bundle = (entry: string) =>
          run(esbuild, [entry, "--bundle", "--platform=browser", "--format=esm", "--outdir=bundle", "--log-level=error"], consumer, env)
        const browser = yield* bundle("src/browser.ts")
        assert.strictEqual(browser.code, 0, `the browser bundle of @cairn/client failed:\n${browser.stderr}`)
        assert.notInclude(browser.stderr, "Could not resolve")
        assert.notInclude(readFileSync(join(consumer, "bundle", "browser.js"), "utf8"), "better-sqlite3")
        // The same check catches a Node import: the Node entry (its peers are installed) cannot be bundled for a browser.
        writeFileSync(join(consumer, "src", "node.ts"), `export { SyncClient, SyncStore } from "@cairn/client/node"\n`)
        const node = yield* bundle("src/node.ts")
        assert.notStrictEqual(node.code, 0, "the Node entry bundled for a browser")
        assert.match(node.stderr, /Could not resolve "(node:)?(fs|path|util|os|crypto)"/)
      }),
    600_000
  )
})

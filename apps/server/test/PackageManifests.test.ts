// Each library package's manifest against what its sources import and the root's pins: a tarball must
// install on its own (PackInstallEndToEnd proves it for domain and client), so an undeclared import, a
// version that drifts from the root pin, or an Effect range that admits Effect 4 fails here first.
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const read = (file: string) => JSON.parse(readFileSync(file, "utf8"))
const rootManifest = read(join(root, "package.json"))
const pins: Record<string, string> = { ...rootManifest.dependencies, ...rootManifest.devDependencies }

const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : []
  })

/** Package names a source file imports (type-only imports included: the `.d.ts` keep them). */
const importedPackages = (file: string) =>
  [...readFileSync(file, "utf8").matchAll(/(?:(?<!["'])\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)"([^"]+)"/gm)]
    .map((m) => m[1]!)
    .filter((spec) => !spec.startsWith(".") && !spec.startsWith("node:"))
    .map((spec) => spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/"))

const isEffectLine = (name: string) => name === "effect" || name.startsWith("@effect/")

/** The peer range for a root pin: up to the next breaking line (the next major, or the next minor of a 0.x). */
const peerRange = (pin: string) => {
  const [major, minor] = pin.split(".").map(Number) as [number, number]
  return major === 0 ? `>=${pin} <0.${minor + 1}` : `>=${pin} <${major + 1}`
}

const libraries = readdirSync(join(root, "packages")).filter((p) => statSync(join(root, "packages", p)).isDirectory())

describe("library package manifests", () => {
  it("cover every package under packages/", () => {
    assert.includeMembers(libraries, ["client", "domain", "store", "server"])
  })

  for (const dir of libraries) {
    it(`@cairn/${dir} declares exactly what its sources import, at the root's pins`, () => {
      const manifest = read(join(root, "packages", dir, "package.json"))
      const dependencies: Record<string, string> = manifest.dependencies ?? {}
      const peers: Record<string, string> = manifest.peerDependencies ?? {}
      const imported = new Set(sources(join(root, "packages", dir, "src")).flatMap(importedPackages))
      imported.delete(manifest.name)

      assert.strictEqual(manifest.version, "0.1.0")
      assert.isUndefined(manifest.private, "a library package is publishable")
      assert.deepStrictEqual([...imported].filter((n) => !(n in dependencies) && !(n in peers)), [], "imported but not declared")
      assert.deepStrictEqual(
        [...Object.keys(dependencies), ...Object.keys(peers)].filter((n) => !imported.has(n)),
        [],
        "declared but not imported"
      )
      for (const [name, version] of Object.entries(dependencies)) {
        if (name.startsWith("@cairn/")) assert.strictEqual(version, "0.1.0", name)
        else {
          assert.isFalse(isEffectLine(name), `${name}: the Effect line is a peer, never a dependency`)
          assert.strictEqual(version, pins[name], `${name} at the root's pin`)
        }
      }
      for (const [name, range] of Object.entries(peers)) {
        assert.isTrue(isEffectLine(name), `${name}: only the Effect line is a peer`)
        assert.isDefined(pins[name], `${name} is pinned at the root`)
        assert.strictEqual(range, peerRange(pins[name]!), `${name}: from the root pin to the next breaking line`)
      }
      assert.deepStrictEqual(manifest.exports["./internal/*"], null)
      for (const entry of [".", "./*"]) {
        assert.deepStrictEqual(Object.keys(manifest.exports[entry]), ["@cairn/source", "types", "default"], entry)
        assert.match(manifest.exports[entry].types, /^\.\/dist\/.*\.d\.ts$/)
        assert.match(manifest.exports[entry].default, /^\.\/dist\/.*\.js$/)
      }
      assert.deepStrictEqual(manifest.files, ["dist", "!dist/*.tsbuildinfo", "README.md"])
    })
  }
})

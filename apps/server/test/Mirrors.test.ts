// The quarantine of mirrors (style rule 21): docs/mirrors.md lists every module that copies or
// replays a library's internals, with the upstream package and version it copies, the upstream
// file, its fallback and its oracle test. This keeps the list true: a pinned version that moved
// (package-lock.json), a module, upstream file or oracle test that is gone, or a source file that
// calls itself a mirror without being listed fails here.
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../../", import.meta.url))
const read = (path: string) => readFileSync(join(root, path), "utf8")

export interface Row {
  readonly line: number
  readonly module: string
  readonly upstream: ReadonlyArray<{ readonly name: string; readonly version: string }>
  readonly upstreamFiles: ReadonlyArray<string>
  readonly fallback: string
  readonly oracles: ReadonlyArray<string>
  readonly gain: string
}

const columns = ["Mirror", "Upstream", "Upstream file", "Fallback", "Oracle test", "Gain on its path"] as const

const ticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)

/** The rows of the one table of `text` whose header is `columns`. */
export const parseTable = (text: string): ReadonlyArray<Row> => {
  const lines = text.split("\n")
  const cells = (line: string) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim())
  const header = lines.findIndex((l) => l.trim().startsWith("|") && cells(l).join("|") === columns.join("|"))
  if (header < 0) throw new Error(`docs/mirrors.md has no table with the columns ${columns.join(", ")}`)
  const rows: Array<Row> = []
  for (let i = header + 2; i < lines.length && lines[i]!.trim().startsWith("|"); i++) {
    const c = cells(lines[i]!)
    if (c.length !== columns.length) throw new Error(`docs/mirrors.md line ${i + 1}: ${c.length} cells, expected ${columns.length}`)
    // `name@version` tokens; in the other columns, the ticked tokens shaped as paths (dir/file.ext) are files; the rest name functions or methods.
    const upstream = ticked(c[1]!).flatMap((token) => {
      const match = /^((?:@[\w.-]+\/)?[\w.-]+)@(\d[\w.+-]*)$/.exec(token)
      return match === null ? [] : [{ name: match[1]!, version: match[2]! }]
    })
    const paths = (cell: string) => ticked(cell).filter((t) => /\/.*\.\w+$/.test(t))
    rows.push({ line: i + 1, module: paths(c[0]!)[0] ?? "", upstream, upstreamFiles: paths(c[2]!), fallback: c[3]!, oracles: paths(c[4]!), gain: c[5]! })
  }
  return rows
}

/** Where a file says it mirrors something: the word, or the `mirrors:` marker of a module header. */
export const marker = /\bmirror(s|ed|ing)?\b/i

const sourceRoots = (): ReadonlyArray<string> => [
  ...readdirSync(join(root, "packages")).map((p) => `packages/${p}/src`),
  ...readdirSync(join(root, "apps")).map((p) => `apps/${p}/src`),
  "catalog/src",
  ...readdirSync(join(root, "examples")).map((p) => `examples/${p}/src`)
]

const sourceFiles = (dir: string): ReadonlyArray<string> =>
  !existsSync(join(root, dir))
    ? []
    : readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? sourceFiles(`${dir}/${entry.name}`) : /\.(ts|tsx|mts|js|mjs)$/.test(entry.name) ? [`${dir}/${entry.name}`] : []
      )

const rows = parseTable(read("docs/mirrors.md"))
const lock = JSON.parse(read("package-lock.json")) as { packages: Record<string, { version?: string }> }

describe("docs/mirrors.md", () => {
  it("lists the mirrors, each with its upstream, fallback, oracle test and measured gain", () => {
    assert.isAtLeast(rows.length, 8)
    for (const row of rows) {
      assert.notStrictEqual(row.module, "", `line ${row.line}: no module`)
      assert.isAbove(row.upstreamFiles.length, 0, `${row.module}: no upstream file`)
      assert.isAbove(row.oracles.length, 0, `${row.module}: no oracle test`)
      assert.notStrictEqual(row.fallback, "", `${row.module}: no fallback (write "none")`)
      assert.notStrictEqual(row.gain, "", `${row.module}: no measured gain`)
    }
  })

  it("names the versions package-lock.json pins", () => {
    for (const row of rows) {
      for (const { name, version } of row.upstream) {
        if (name === "node") {
          // Node is the runtime, not a locked package: the major the mirror was checked against.
          assert.strictEqual(process.versions.node.split(".")[0], version, `${row.module} mirrors node@${version}; this is node ${process.versions.node}`)
          continue
        }
        const pinned = lock.packages[`node_modules/${name}`]?.version
        assert.isDefined(pinned, `${row.module}: ${name} is not in package-lock.json`)
        assert.strictEqual(
          pinned,
          version,
          `${row.module} mirrors ${name}@${version}, but package-lock.json pins ${pinned}: compare it with the new upstream file, then update docs/mirrors.md`
        )
      }
    }
  })

  it("names files that exist: the module, its upstream files and its oracle tests", () => {
    for (const row of rows) {
      assert.isTrue(existsSync(join(root, row.module)), `${row.module} (line ${row.line}) does not exist`)
      for (const file of row.upstreamFiles) {
        // Repository and node_modules paths are checked; a runtime's own file (node's lib/...) is not on disk.
        if (file.startsWith("lib/")) continue
        assert.isTrue(existsSync(join(root, file)), `${row.module}: upstream file ${file} does not exist`)
      }
      for (const oracle of row.oracles) {
        assert.match(oracle, /\/test\/.+\.test\.ts$/, `${row.module}: ${oracle} is not a test file`)
        assert.isTrue(existsSync(join(root, oracle)), `${row.module}: oracle test ${oracle} does not exist`)
      }
    }
  })

  it("lists every source file that says it mirrors something", () => {
    const listed = new Set(rows.map((r) => r.module))
    const unlisted = sourceRoots()
      .flatMap(sourceFiles)
      .filter((file) => marker.test(read(file)) && !listed.has(file))
    assert.deepStrictEqual(unlisted, [], "these files say they mirror a library but are not in docs/mirrors.md")
  })
})

/**
 * `npm run bindings`: compiles the tracker catalog and writes its typed client bindings to
 * packages/client/src/generated/tracker.ts (checked in, type-checked by `tsc -b`).
 * `--check` compares instead of writing and exits 1 when the checked-in file is stale;
 * `--out <file>` writes or checks another file. The generator is `BindingsGenerator` of the
 * server app, which `cairn bindings` runs for any application.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { compile } from "@cairn/catalog/Catalog"
import { generate } from "@cairn/server-app/BindingsGenerator"
import { tracker } from "@cairn/tracker/tracker"
import { Effect } from "effect"

const main = async () => {
  const args = process.argv.slice(2)
  const check = args.includes("--check")
  const outIndex = args.indexOf("--out")
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")
  const out = outIndex >= 0 && args[outIndex + 1] ? resolve(args[outIndex + 1]!) : join(root, "packages/client/src/generated/tracker.ts")
  const source = generate(await Effect.runPromise(compile(tracker)))
  if (check) {
    let current = ""
    try {
      current = readFileSync(out, "utf8")
    } catch {
      current = ""
    }
    if (current !== source) {
      console.error(`${out} is stale: run \`npm run bindings\` and commit the result.`)
      process.exit(1)
    }
    return
  }
  writeFileSync(out, source)
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main()
}

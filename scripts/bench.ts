/**
 * `npm run bench -- <name...>`: runs benchmarks from scripts/bench/<name>.ts. Each prints
 * one summary line with a ratio against a baseline measured in the same run, because
 * these machines are shared and noisy. Without a name, runs every benchmark.
 */
import { readdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const here = join(dirname(fileURLToPath(import.meta.url)), "bench")
const available = readdirSync(here)
  .filter((f) => f.endsWith(".ts"))
  .map((f) => f.slice(0, -3))
  .sort()
const requested = process.argv.slice(2).filter((a) => !a.startsWith("-"))
const names = requested.length > 0 ? requested : available
for (const name of names) {
  if (!available.includes(name)) {
    console.error(`unknown benchmark "${name}"; available: ${available.join(", ")}`)
    process.exit(2)
  }
}
for (const name of names) {
  const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { readonly run: () => Promise<void> }
  await mod.run()
}

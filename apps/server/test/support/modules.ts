// What a server child loads: its every module resolution recorded by the preload
// `recordModules.mjs` (registered after tsx), for the embedded-mode module check.
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const recorder = fileURLToPath(new URL("./recordModules.mjs", import.meta.url))

/** A fresh file to record into, and the node arguments and environment that make a child record there. */
export const moduleRecording = () => {
  const file = join(mkdtempSync(join(tmpdir(), "cairn-modules-")), "modules.txt")
  return {
    file,
    nodeArgs: ["--import", "tsx", "--import", recorder] as ReadonlyArray<string>,
    env: { CAIRN_TEST_MODULES_FILE: file } as Readonly<Record<string, string>>,
    /** The resolved module URLs recorded so far. */
    modules: (): ReadonlyArray<string> => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter((l) => l !== "") : [])
  }
}

/** Whether a module URL is part of the cluster: our package, the cluster engine, or PostgreSQL's client. */
export const isClusterModule = (url: string) =>
  /\/packages\/cluster\/|\/node_modules\/@effect\/cluster\/|\/node_modules\/@effect\/sql-pg\/|\/node_modules\/pg\/|\/node_modules\/pg-[a-z-]+\//.test(url)

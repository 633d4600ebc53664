/**
 * A throwaway PostgreSQL server for a test or benchmark: Debian's `postgresql` binaries, a new
 * cluster in a temporary directory, listening on 127.0.0.1 only (a free port, its socket in the
 * same directory), trust authentication for the local user. `stop` shuts it down fast and removes
 * the directory. As root (CI) the server runs as the `postgres` user, because `initdb` refuses root.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePortPromise } from "./freePort.js"

export interface Postgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string
  readonly port: number
  /** Makes a new empty database and answers its URL (one per test that wants isolation). */
  readonly createDatabase: (name: string) => string
  /** Fast shutdown, then the directory is removed. Idempotent. */
  readonly stop: () => void
}

/** The directory of Debian's PostgreSQL binaries (the newest installed major), if any. */
export const postgresBin = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const majors = readdirSync(root)
    .filter((d) => /^\d+$/.test(d) && existsSync(join(root, d, "bin", "pg_ctl")))
    .sort((a, b) => Number(b) - Number(a))
  return majors[0] === undefined ? undefined : join(root, majors[0], "bin")
}

/** Why PostgreSQL cannot be started here, or undefined when it can (tests skip with this reason). */
export const postgresUnavailable = (): string | undefined =>
  postgresBin() === undefined ? "PostgreSQL is not installed (Debian package `postgresql`; .ci/run installs it)" : undefined

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0

/** Starts a new PostgreSQL cluster on 127.0.0.1 and answers how to reach and stop it. */
export const startPostgres = async (): Promise<Postgres> => {
  const bin = postgresBin()
  if (bin === undefined) throw new Error(postgresUnavailable())
  const dir = mkdtempSync(join(tmpdir(), "cairn-pg-"))
  const data = join(dir, "data")
  const asRoot = isRoot()
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim())
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim())
    chownSync(dir, uid, gid)
    chmodSync(dir, 0o700)
  }
  const run = (command: string, args: ReadonlyArray<string>) => {
    const [file, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", join(bin, command), ...args]] : [join(bin, command), [...args]]
    const result = spawnSync(file as string, argv as Array<string>, { encoding: "utf8", timeout: 60_000 })
    if (result.status !== 0) throw new Error(`${command} failed (${result.status}): ${result.stderr || result.stdout}`)
  }
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"])
  const port = await freePortPromise()
  // fsync off: a test cluster is thrown away, and its durability is not what is tested.
  const options = `-h 127.0.0.1 -p ${port} -k ${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`
  run("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "log"), "-w", "-t", "60", "start"])
  let stopped = false
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  return {
    url,
    port,
    createDatabase: (name) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`)
      run("psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres", "-c", `CREATE DATABASE ${name}`])
      return `postgres://postgres@127.0.0.1:${port}/${name}`
    },
    stop: () => {
      if (stopped) return
      stopped = true
      try {
        run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
      } catch {
        // already gone
      }
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

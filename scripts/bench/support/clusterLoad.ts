/**
 * The cluster benchmark's load driver and meters: closed-loop `/db/rpc` clients on keep-alive
 * `node:http` agents (one per target process), every answer checked and every refusal tallied by
 * tag and status; CPU time of the cluster's processes read from /proc (the runners and the
 * harness's PostgreSQL); and the wait for the shard locks to settle after runners join.
 */
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { Agent, request } from "node:http"
import { join } from "node:path"
import { postgresBin } from "@cairn/testkit/Postgres"

export interface Target {
  readonly port: number
  readonly agent: Agent
}

/**
 * Keep-alive sockets to `port`. An idle socket is dropped after 4 s, before the server's 5 s
 * keep-alive timeout: otherwise the server may close one just as a call is written on it (ECONNRESET).
 */
export const target = (port: number, sockets: number): Target => ({ port, agent: new Agent({ keepAlive: true, maxSockets: sockets, timeout: 4_000 }) })

export interface Answer {
  readonly status: number
  readonly text: string
}

/** One `/db/rpc` call to `to`, addressed as the deployment's public name (as a load balancer forwards it). */
export const call = (to: Target, publicHost: string, token: string, tag: string, payload: unknown): Promise<Answer> =>
  new Promise((resolve) => {
    const body = JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })
    const req = request(
      {
        host: "127.0.0.1",
        port: to.port,
        method: "POST",
        path: "/db/rpc",
        agent: to.agent,
        headers: { host: publicHost, "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${token}` }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("error", (e) => resolve({ status: -1, text: String(e) }))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
      }
    )
    // A connection refused or reset (a killed process) is an answer too: status -1, tallied.
    req.on("error", (e) => resolve({ status: -1, text: String(e) }))
    req.end(body)
  })

/** What a phase of load got: acknowledged commits, successful queries, and every other answer by kind. */
export class Tally {
  mutations = 0
  queries = 0
  readonly refusals = new Map<string, { count: number; example: string }>()

  /** Counts `answer`; true when it is the success the call asked for. */
  record(tag: "Mutate" | "Query", answer: Answer): boolean {
    const ok =
      answer.status === 200 && (tag === "Mutate" ? answer.text.includes(`"outcome":"committed"`) : answer.text.includes(`"_tag":"Success"`))
    if (ok) {
      if (tag === "Mutate") this.mutations++
      else this.queries++
      return true
    }
    const kind = `${tag}:${answer.status}`
    const seen = this.refusals.get(kind)
    if (seen) seen.count++
    else this.refusals.set(kind, { count: 1, example: answer.text.replace(/\s+/g, " ").slice(0, 240) })
    return false
  }

  get refused(): number {
    let n = 0
    for (const { count } of this.refusals.values()) n += count
    return n
  }

  /** `Mutate:503=12 Query:503=3` (or `none`). */
  summary(): string {
    if (this.refusals.size === 0) return "none"
    return [...this.refusals.entries()].map(([kind, { count }]) => `${kind}=${count}`).join(" ")
  }

  examples(): ReadonlyArray<string> {
    return [...this.refusals.entries()].map(([kind, { example }]) => `${kind}: ${example}`)
  }
}

/** CPU seconds (user + system) of a process, from /proc; 0 once it is gone. */
const ticksPerSecond = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
export const cpuSeconds = (pid: number): number => {
  try {
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
  } catch {
    return 0
  }
}

const parentOf = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return undefined
  }
}

/**
 * CPU seconds of the PostgreSQL listening on `port` (its postmaster and its children, read at each
 * call). Other sessions may run their own PostgreSQL on this machine: the postmaster is found by its
 * port. A backend that starts and exits between two readings is missed; the cluster's pools keep theirs open.
 */
export const postgresCpu = (port: number): (() => number) => {
  const pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number)
  const postmaster = pids.find((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      return argv.some((a) => a.endsWith("/postgres") || a === "postgres") && argv.join(" ").includes(`-p ${port} `)
    } catch {
      return false
    }
  })
  if (postmaster === undefined) return () => 0
  // The last reading of every process seen: a backend that exits keeps what it had used by then.
  const seen = new Map<number, number>([[postmaster, 0]])
  return () => {
    for (const d of readdirSync("/proc")) if (/^\d+$/.test(d) && parentOf(Number(d)) === postmaster && !seen.has(Number(d))) seen.set(Number(d), 0)
    let total = 0
    for (const [pid, last] of seen) {
      const now = Math.max(last, cpuSeconds(pid))
      seen.set(pid, now)
      total += now
    }
    return total
  }
}

/** One statement through Debian's psql, as the test kit creates databases; its rows as text. */
export const psql = (port: number, database: string, text: string): ReadonlyArray<string> => {
  const result = spawnSync(join(postgresBin()!, "psql"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", database, "-Atc", text], {
    encoding: "utf8",
    timeout: 10_000
  })
  if (result.status !== 0) throw new Error(`psql: ${result.stderr}`)
  return result.stdout.split("\n").filter((l) => l !== "")
}

/**
 * Waits until the shard locks (PostgreSQL advisory locks, one per shard, numbered from 1 000 000 by
 * @effect/cluster's SqlRunnerStorage) are held by exactly `runners` sessions and have not moved for
 * `stableMs`: runners that start together first take shards, then hand some over as the others join.
 */
export const shardsSettled = async (port: number, runners: number, stableMs = 2_000, timeoutMs = 60_000): Promise<ReadonlyArray<number>> => {
  const deadline = Date.now() + timeoutMs
  let last = ""
  let since = Date.now()
  for (;;) {
    const rows = psql(port, "postgres", "SELECT pid, count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid >= 1000000 GROUP BY pid ORDER BY pid")
    const counts = rows.map((r) => Number(r.split("|")[1]))
    const shape = rows.join(",")
    if (shape !== last) {
      last = shape
      since = Date.now()
    } else if (counts.length === runners && Date.now() - since >= stableMs) {
      return counts
    }
    if (Date.now() > deadline) throw new Error(`shards did not settle over ${runners} runners: ${shape}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

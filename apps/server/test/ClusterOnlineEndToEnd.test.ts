// Online per-tenant operations in a real cluster on loopback (PostgreSQL, two runners and a front of
// the real entry point): `cairn restore` of one tenant to a point in time, run as the operator runs it
// (the CLI with the cluster's settings and CAIRN_ROLE=front), while four other tenants take writes and
// reads on every process; its refused cases; `cairn move`; and what the cluster does when a runner joins.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { postgresUnavailable } from "@cairn/testkit/Postgres"
import * as Position from "@cairn/store/Position"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { cairn } from "./support/cli.js"
import { createProject, projects } from "./support/requests.js"
import { type Answer, type Cluster, type ClusterProcess, invocationId, startCluster, successOf, waitFor } from "./support/cluster.js"

const unavailable = postgresUnavailable()
const scope = { entities: [{ from: { kind: "entity", name: "Project" } }] }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Record_ {
  readonly org: string
  readonly at: number
  readonly status: number
  readonly verb: string
  readonly text: string
}

describe.skipIf(unavailable !== undefined)("cluster: online per-tenant operations", () => {
  let cluster: Cluster
  let servers: Array<ClusterProcess> = []
  const others = ["tenant-b", "tenant-c", "tenant-d", "tenant-e"]
  /** Every answer to B..E since the load started (they must all succeed while A is restored). */
  const log: Array<Record_> = []
  /** Names B..E were acknowledged to have created, and the last acknowledged position of each. */
  const acknowledged = new Map<string, Array<string>>()
  const lastPosition = new Map<string, string>()
  let loading = true
  let load: Promise<void> = Promise.resolve()

  /** The operator's CLI with the cluster's settings, as a client of the cluster (holds no shards, touches no files). */
  const operator = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
    cairn(args, { ...cluster.env, CAIRN_ROLE: "front", CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-operator-")), ...extra })

  const names = (answer: Answer): Array<string> => (successOf(answer)?.rows ?? []).map((r: any) => r.name).sort()

  beforeAll(async () => {
    // Whole answers for the oracle checks (a tenant holds hundreds of rows by the end).
    cluster = await startCluster({ env: { CAIRN_QUERY_DEFAULT_PAGE_SIZE: "5000", CAIRN_QUERY_MAX_PAGE_SIZE: "5000" } })
    servers = await Promise.all([cluster.start("runner", "a"), cluster.start("runner", "b"), cluster.start("front", "front")])
    // B..E: one loop each, a write then a read, through every process in turn, for the whole file.
    load = Promise.all(
      others.map(async (org, k) => {
        const t = await cluster.token(org)
        const mine: Array<string> = []
        acknowledged.set(org, mine)
        for (let i = 0; loading; i++) {
          const server = servers[(i + k) % servers.length]!
          const name = `${org}-${i}`
          const wrote = await cluster.rpc(server, t, "Mutate", createProject(name, invocationId()))
          log.push({ org, at: Date.now(), status: wrote.status, verb: "mutate", text: wrote.text })
          if (wrote.status === 200 && successOf(wrote)?.outcome === "committed") {
            mine.push(name)
            lastPosition.set(org, successOf(wrote).position)
          }
          const read = await cluster.rpc(servers[(i + k + 1) % servers.length]!, t, "Query", { query: { ...projects, page: { first: 20 } } })
          log.push({ org, at: Date.now(), status: read.status, verb: "query", text: read.text })
          await sleep(20)
        }
      })
    ).then(() => undefined)
  }, 180_000)

  afterAll(async () => {
    loading = false
    await load
    await cluster?.stop()
  }, 60_000)

  it("cairn restore of A to P while B..E take writes: A answers P's state everywhere, continues from P, its live sync client is told to resnapshot; B..E see no error", async () => {
    const t = await cluster.token("tenant-a")
    const [runnerA, runnerB, front] = servers as [ClusterProcess, ClusterProcess, ClusterProcess]
    /** A's acknowledged creates, in order: name and position (one writer loop, so positions increase within one history). */
    const receipts: Array<{ readonly name: string; readonly position: string }> = []
    const refusedWhileHeld: Array<string> = []
    let writingA = true
    const writeA = async (i: number) => {
      const id = invocationId()
      for (;;) {
        const answer = await cluster.rpc(servers[i % servers.length]!, t, "Mutate", createProject(`a-${i}`, id))
        if (answer.status === 200 && successOf(answer)?.outcome === "committed") {
          receipts.push({ name: `a-${i}`, position: successOf(answer).position })
          return
        }
        // Retryable while an operator holds it (the same invocation id: applied at most once).
        expect(answer.status, answer.text).toBe(503)
        refusedWhileHeld.push(answer.text)
        await sleep(50)
      }
    }
    for (let i = 0; i < 12; i++) await writeA(i)
    const P = receipts[9]!.position
    const atP = receipts.slice(0, 10).map((r) => r.name).sort()

    // A sync client of A: a snapshot, then live changes from its checkpoint (on runner b's followed copy).
    const snapshot = await cluster.rpc(runnerB, t, "SyncSnapshot", { scope }, "/db/sync")
    expect(snapshot.status, snapshot.text).toBe(200)
    const live = cluster.rpc(runnerB, t, "SyncChanges", { scope, cursor: successOf(snapshot).checkpoint.cursor, live: true }, "/db/sync")

    // A keeps writing while it is restored.
    let i = 12
    const writerA = (async () => {
      while (writingA) await writeA(i++)
    })()
    await sleep(300)

    const started = Date.now()
    const ran = await operator(["restore", "--database", "tenant-a", "--to", P])
    const ended = Date.now()
    expect(ran.code, ran.stderr + ran.stdout).toBe(0)
    const done = /restored (\w+) online to position (\d+) \(it was at (\d+); history (\d+) → (\d+)\) on runner (\S+); it refused calls for (\d+) ms/.exec(ran.stdout)
    expect(done, ran.stdout).not.toBeNull()
    expect(Number(done![2])).toBe(Position.decode(P))
    console.log(`online restore: cli ${ended - started} ms, tenant A refused calls for ${done![7]} ms (from ${done![3]} to ${done![2]}, runner ${done![6]})`)
    await sleep(500)
    writingA = false
    await writerA

    // The new history starts where the positions drop back: every acknowledged write before the restore
    // at or below P, and every one after it. Positions continue from P.
    const drop = receipts.findIndex((r, k) => k > 0 && Position.decode(r.position)! <= Position.decode(receipts[k - 1]!.position)!)
    expect(drop, "A wrote in both histories").toBeGreaterThan(10)
    expect(Position.decode(receipts[drop]!.position)).toBe(Position.decode(P)! + 1)
    receipts.slice(drop).forEach((r, k) => expect(Position.decode(r.position)).toBe(Position.decode(P)! + 1 + k))
    const expected = [...receipts.slice(0, drop).filter((r) => Position.decode(r.position)! <= Position.decode(P)!), ...receipts.slice(drop)].map((r) => r.name).sort()
    expect(atP.every((n) => expected.includes(n))).toBe(true)
    const last = receipts[receipts.length - 1]!.position
    for (const server of servers) {
      await waitFor(`A's new history on ${server.name}`, async () => {
        const answer = await cluster.rpc(server, t, "Query", { query: projects, atLeast: last })
        return answer.status === 200 && JSON.stringify(names(answer)) === JSON.stringify(expected) ? true : undefined
      }, 15_000)
    }
    // One more write: the next position of the new history.
    const id = invocationId()
    const next = await cluster.rpc(runnerA, t, "Mutate", createProject("after", id))
    expect(successOf(next)?.position).toBe(Position.encode(Position.decode(last)! + 1))

    // The live stream of the old history ended with a resnapshot; resuming from its last cursor resnapshots too.
    const stream = await Promise.race([live, sleep(15_000).then(() => undefined)])
    expect(stream, "the live stream of the old history ended").toBeDefined()
    const messages = (stream!.json as Array<any>).flatMap((line) => (line._tag === "Chunk" ? line.values : []))
    expect(messages.at(-1)?._tag, stream!.text).toBe("Resnapshot")
    const batches = messages.filter((m) => m._tag === "SyncBatch")
    // Nothing of the new history was fed on the old cursor.
    for (const b of batches) expect(Position.decode(b.checkpoint.position)!).toBeLessThanOrEqual(Position.decode(receipts[drop - 1]!.position)!)
    const cursor = batches.at(-1)?.checkpoint.cursor ?? successOf(snapshot).checkpoint.cursor
    for (const server of [front, runnerA]) {
      const resumed = await cluster.rpc(server, t, "SyncChanges", { scope, cursor, live: false }, "/db/sync")
      const first = (resumed.json as Array<any>).flatMap((line) => (line._tag === "Chunk" ? line.values : []))[0]
      expect(first?._tag, resumed.text).toBe("Resnapshot")
    }
    // A refused calls only while held, each a retryable 503: the operator's message, or (on a loaded machine) the
    // front's deadline passing while the entity held them.
    for (const text of refusedWhileHeld) {
      expect(JSON.parse(text).error, text).toBe("unavailable")
      expect(text).toMatch(/being restored by an operator|did not answer in time/)
    }

    // B..E: every request during the restore (and before) succeeded.
    const during = log.filter((r) => r.at >= started - 1000 && r.at <= ended + 1000)
    expect(during.length).toBeGreaterThan(20)
    expect(log.filter((r) => r.status !== 200).map((r) => `${r.org} ${r.verb} ${r.status} ${r.text.slice(0, 200)}`)).toEqual([])
    console.log(`B..E: ${log.length} requests, ${during.length} during the restore, 0 errors`)
  }, 180_000)

  it("refused restores change nothing and say why: before the oldest kept snapshot, an unknown database, a bad signature, flags of the embedded restore", async () => {
    const t = await cluster.token("tenant-a")
    const before = await cluster.rpc(servers[2]!, t, "Query", { query: projects })
    const position = successOf(before).basis.position
    // After the restore, A's history starts at its base snapshot: nothing before it is reachable.
    // Run together: each CLI run pays its own startup (node + tsx) and cluster join.
    const [tooOld, unknown, forged, misused] = await Promise.all([
      operator(["restore", "--database", "tenant-a", "--to", "1"]),
      operator(["restore", "--database", "nobody-here", "--to", "3"]),
      operator(["restore", "--database", "tenant-a", "--to", position], { CAIRN_SECRET: "not-this-deployments-secret-0123456789abcdef" }),
      operator(["restore", "--database", "tenant-a", "--to", "3", "--from", "/tmp"])
    ])
    expect(tooOld.code).toBe(1)
    expect(tooOld.stderr).toMatch(/Restore refused: position 1 is before the oldest kept snapshot \(position \d+\): the archive reaches positions \d+ to \d+/)
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain("this database has no archive in the cluster")
    expect(forged.code).toBe(1)
    expect(forged.stderr).toContain("not signed with this deployment's CAIRN_SECRET")
    expect(misused.code).toBe(1)
    expect(misused.stderr).toContain("--from, --log and --force do not apply")
    // Nothing changed: the same state, and the next write continues the same history.
    const after = await cluster.rpc(servers[2]!, t, "Query", { query: projects })
    expect(names(after)).toEqual(names(before))
    const next = await cluster.rpc(servers[2]!, t, "Mutate", createProject("still-here", invocationId()))
    expect(successOf(next)?.position).toBe(Position.encode(Position.decode(position)! + 1))
  }, 300_000)

  it("cairn move closes a database where it runs; it keeps answering and no acknowledged receipt is lost", async () => {
    const org = "tenant-f"
    const t = await cluster.token(org)
    const acked: Array<string> = []
    let retried = 0
    let moving = true
    const writer = (async () => {
      for (let i = 0; moving; i++) {
        const id = invocationId()
        for (;;) {
          const answer = await cluster.rpc(servers[i % servers.length]!, t, "Mutate", createProject(`f-${i}`, id))
          if (answer.status === 200) {
            acked.push(`f-${i}`)
            break
          }
          expect(answer.status, answer.text).toBe(503)
          retried += 1
          await sleep(50)
        }
      }
    })()
    await waitFor("some writes of F", () => acked.length >= 5, 20_000)
    const ran = await operator(["move", "--database", org])
    expect(ran.code, ran.stderr).toBe(0)
    expect(ran.stdout).toMatch(/closed \w+ on runner \S+ \(every commit shipped\); its next call opens it on the runner its shard is assigned to now/)
    const count = acked.length
    await waitFor("writes of F after the move", () => acked.length >= count + 5, 20_000)
    moving = false
    await writer
    let seen: Answer | undefined
    await waitFor("F's acknowledged writes everywhere", async () => {
      seen = await cluster.rpc(servers[2]!, t, "Query", { query: projects, atLeast: Position.encode(acked.length) })
      return acked.every((n) => names(seen!).includes(n)) ? true : undefined
    }, 30_000).catch((e) => {
      throw new Error(`${e}: last answer ${seen?.status} ${seen?.text.slice(0, 500)}`)
    })
    console.log(`move: ${acked.length} writes acknowledged, ${retried} retried while it closed`)
  }, 120_000)

  it("a runner that joins is given shards: databases placed there open on it (an existing one whose shard it took is rebuilt there from the archive); B..E lose nothing acknowledged", async () => {
    const c = await cluster.start("runner", "c")
    servers.push(c)
    // New tenants after the join: placed by shard over the three runners, so some open on c.
    await sleep(3000)
    const fresh = Array.from({ length: 12 }, (_, k) => `tenant-new-${k}`)
    for (const org of fresh) {
      const created = await cluster.rpc(servers[2]!, await cluster.token(org), "Mutate", createProject("first", invocationId()))
      expect(created.status, created.text).toBe(200)
    }
    await waitFor("a database activated on the new runner", () => (c.child.output().includes("database activated") ? true : undefined), 30_000)
    const activated = c.child.output().split("\n").filter((l) => l.includes("database activated")).length
    // Databases that existed before the join and whose shard c took over: rebuilt there from the archive.
    const moved = c.child.output().split("\n").filter((l) => l.includes("database materialized from the archive")).map((l) => JSON.parse(l).annotations)
    console.log(`runner c joined: ${activated} database(s) opened there, ${moved.length} of them existing ones moved from a or b (${JSON.stringify(moved.map((m: any) => m.how))})`)
    // Every tenant still answers, and B..E lost nothing acknowledged.
    await sleep(2000)
    for (const org of others) {
      const t = await cluster.token(org)
      const mine = [...acknowledged.get(org)!]
      const atLeast = lastPosition.get(org)!
      let seen: Answer | undefined
      for (const server of servers) {
        await waitFor(`${org}'s acknowledged writes on ${server.name}`, async () => {
          seen = await cluster.rpc(server, t, "Query", { query: projects, atLeast })
          return seen.status === 200 && mine.every((n) => names(seen!).includes(n)) ? true : undefined
        }, 30_000).catch((e) => {
          throw new Error(`${e}: last answer ${seen?.status} ${seen?.text.slice(0, 500)} (${mine.length} acknowledged, ${names(seen!).length} seen)`)
        })
      }
    }
    const errors = log.filter((r) => r.status !== 200)
    console.log(`after the join: ${log.length} requests to B..E, ${errors.length} not 200: ${JSON.stringify(errors.map((e) => `${e.status} ${e.text.slice(0, 120)}`).slice(0, 5))}`)
  }, 120_000)
})

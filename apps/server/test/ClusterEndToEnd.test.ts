// Cairn as a cluster on loopback: PostgreSQL (started here), two runners and one front of the
// real entry point (`apps/server/src/main.ts` with CAIRN_ROLE), beside an embedded server with
// the same settings as the oracle of every answer. Every process trusts one issuer (a shared
// HMAC key) and one public base URL, as behind a load balancer.
import { type Child, launchChild, stopChild } from "./support/child.js"
import { cairn } from "./support/cli.js"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { postgresUnavailable } from "@cairn/testkit/Postgres"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { createProject, projects } from "./support/requests.js"
import { isClusterModule, moduleRecording } from "./support/modules.js"
import { type Answer, type Cluster, comparable, invocationId, rpc as rpcAs, startCluster, successOf, waitFor } from "./support/cluster.js"

const unavailable = postgresUnavailable()

/** The deployment's public `host:port` (the front's), set once the front's port is chosen. */
let publicHost = ""
/** One call to `server` addressed as the deployment's public name (see `support/cluster`). */
const rpc = (server: Pick<Child, "port">, token: string, tag: string, payload: unknown, path = "/db/rpc"): Promise<Answer> =>
  rpcAs(server, publicHost, token, tag, payload, path)

describe("cluster settings", () => {
  it("cairn serve --role runner without its settings lists every missing one and exits 2", async () => {
    const ran = await cairn(["serve", "--role", "runner"], { CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-role-")), CAIRN_STAGE: "test" })
    expect(ran.code, ran.stderr).toBe(2)
    for (const name of ["CAIRN_CLUSTER_DATABASE_URL", "CAIRN_SECRET", "CAIRN_RUNNER_PORT"]) expect(ran.stderr).toContain(`${name} is required for CAIRN_ROLE=runner`)
  })
})

describe.skipIf(unavailable !== undefined)("cluster: two runners and a front", () => {
  let cluster: Cluster
  let front: Child
  let runners: Array<Child> = []
  let embedded: Child
  const recording = moduleRecording()
  const token = (org: string, scope = "cairn:read cairn:write") => cluster.token(org, { scope })

  beforeAll(async () => {
    cluster = await startCluster({ env: { CAIRN_CLUSTER_SEND_TIMEOUT: "4 seconds" }, nodeArgs: (name) => (name === "a" ? recording.nodeArgs : []) })
    publicHost = cluster.publicHost
    // The oracle: one embedded process with the same issuer, secret and public name.
    const common = Object.fromEntries(Object.entries(cluster.env).filter(([name]) => !name.startsWith("CAIRN_CLUSTER_") && name !== "CAIRN_OBJECT_DIR"))
    const [a, b, f] = await Promise.all([cluster.start("runner", "a", recording.env), cluster.start("runner", "b"), cluster.start("front", "front")])
    runners = [a.child, b.child]
    front = f.child
    embedded = await launchChild("apps/server/src/main.ts", mkdtempSync(join(tmpdir(), "cairn-cluster-embedded-")), common)
  }, 180_000)

  afterAll(async () => {
    await Promise.all([cluster?.stop(), embedded === undefined ? undefined : stopChild(embedded, "SIGTERM")])
  }, 60_000)

  /** The runner whose log holds `requestId` (the one that ran the call). */
  const ranOn = (requestId: string) =>
    waitFor(`a runner logging ${requestId}`, () => runners.find((r) => r.output().includes(`"requestId":"${requestId}"`)))

  it("a mutation through the front or either runner is committed once, and replays the same receipt", async () => {
    const t = await token("acme")
    const id = invocationId()
    const first = await rpc(front, t, "Mutate", createProject("Apollo", id))
    const receipt = successOf(first)
    expect(first.status, first.text).toBe(200)
    expect(receipt?.outcome).toBe("committed")
    // The same invocation again, through the front and through each runner: the same receipt.
    for (const server of [front, ...runners]) {
      const again = await rpc(server, t, "Mutate", createProject("Apollo", id))
      expect(successOf(again)).toEqual(receipt)
    }
    // New intents through each runner commit too, in the database's one order.
    const positions = [receipt.position]
    for (const server of runners) {
      const next = successOf(await rpc(server, t, "Mutate", createProject(`via ${server.port}`, invocationId())))
      expect(next?.outcome).toBe("committed")
      positions.push(next.position)
    }
    expect([...positions].sort()).toEqual(positions)
    expect(new Set(positions).size).toBe(3)
  })

  it("a query anywhere sees the commit; the runner that ran it logs the front's request id", async () => {
    const t = await token("initech")
    const created = await rpc(front, t, "Mutate", createProject("Zephyr", invocationId()))
    expect(successOf(created)?.outcome, created.text).toBe("committed")
    const owner = await ranOn(created.requestId)
    const lines = owner.output().split("\n").filter((l) => l.includes(`"requestId":"${created.requestId}"`))
    const entityLine = JSON.parse(lines.find((l) => l.includes("entity mutate"))!)
    // One trace across the hop: the runner's span is parented under the front's request.
    const frontLine = JSON.parse(await waitFor("the front's log line", () => front.output().split("\n").find((l) => l.includes(`"requestId":"${created.requestId}"`) && l.includes("/db/rpc"))))
    expect(entityLine.annotations.traceId).toBeDefined()
    expect(entityLine.annotations.traceId).toBe(frontLine.annotations.traceId)
    const atLeast = successOf(created).position
    const entityQuery = (requestId: string) => () =>
      runners.some((r) => r.output().split("\n").some((l) => l.includes(`"requestId":"${requestId}"`) && l.includes("entity query")))
    for (const server of [front, ...runners]) {
      // Read your writes: at least the receipt's position, from this process's followed copy (the writer is not asked).
      const answer = await rpc(server, t, "Query", { query: projects, atLeast })
      expect(answer.status, answer.text).toBe(200)
      expect(successOf(answer).rows.map((r: any) => r.name)).toContain("Zephyr")
      expect(successOf(answer).basis.position >= atLeast).toBe(true)
      expect(entityQuery(answer.requestId)()).toBe(false)
    }
    // A position no copy has reached in CAIRN_READ_WAIT: the writer answers, at its own (latest) position.
    const ahead = await rpc(front, t, "Query", { query: projects, atLeast: "c00zzzz" })
    expect(ahead.status, ahead.text).toBe(200)
    expect(successOf(ahead).rows.map((r: any) => r.name)).toContain("Zephyr")
    await waitFor("the owner's entity query line", entityQuery(ahead.requestId))

    // Snapshot pages: the same records through any process (the front's page comes from the entity).
    const scope = { entities: [{ from: { kind: "entity", name: "Project" } }] }
    const pages = await Promise.all([front, ...runners].map((server) => rpc(server, t, "SyncSnapshot", { scope }, "/db/sync")))
    for (const page of pages) expect(page.status, page.text).toBe(200)
    const [first, ...others] = pages.map(successOf)
    expect(first.records.map((r: any) => r.record.name)).toContain("Zephyr")
    for (const other of others) {
      expect(other.records).toEqual(first.records)
      expect(other.checkpoint.position).toBe(first.checkpoint.position)
    }

    // Changes after the snapshot's cursor: served by every process from its followed copy.
    for (const server of [front, ...runners]) {
      const changes = await rpc(server, t, "SyncChanges", { scope, cursor: first.checkpoint.cursor, live: false }, "/db/sync")
      expect(changes.status, changes.text).toBe(200)
    }
  })

  it("refusals and public errors are the embedded server's, status and body", async () => {
    const org = `errors-${Date.now()}`
    const t = await token(org)
    const reader = await token(org, "cairn:read")
    const conflicted = invocationId()
    const cases: ReadonlyArray<readonly [string, string, string, unknown]> = [
      ["invalid input", t, "Mutate", { ...createProject("x", invocationId()), input: { name: 42 } }],
      ["insufficient scope", reader, "Mutate", createProject("x", invocationId())],
      ["catalog changed", t, "Mutate", { ...createProject("x", invocationId()), ifCatalog: "c-stale-token" }],
      ["invalid query", t, "Query", { query: { ...projects, from: { kind: "entity", name: "Nope" } } }],
      // Decided by the writer, on the runner: a target that does not exist, then an invocation reused for another intent.
      ["inaccessible", t, "Mutate", { operation: { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "rename" }, target: { kind: "entity", entity: "Task", id: "nope" }, input: { title: "x" }, invocationId: invocationId() }],
      ["first intent", t, "Mutate", createProject("first", conflicted)],
      ["invocation conflict", t, "Mutate", createProject("second", conflicted)]
    ]
    for (const [name, bearer, tag, payload] of cases) {
      const expected = comparable(await rpc(embedded, bearer, tag, payload))
      if (name === "first intent") {
        expect(successOf(await rpc(front, bearer, tag, payload))?.outcome).toBe("committed")
        continue
      }
      for (const server of [front, ...runners]) {
        expect(comparable(await rpc(server, bearer, tag, payload)), `${name} on ${server.port}`).toEqual(expected)
      }
    }
  })

  it("runners load the cluster (the control of the embedded module check)", () => {
    expect(recording.modules().some(isClusterModule)).toBe(true)
  })

  it("SIGKILL of a database's runner mid-load: the other runner takes it over; in-flight calls get a receipt or a retryable 503", async () => {
    const t = await token("umbrella")
    const created = await rpc(front, t, "Mutate", createProject("Before", invocationId()))
    expect(successOf(created)?.outcome, created.text).toBe("committed")
    const owner = await ranOn(created.requestId)
    const survivor = runners.find((r) => r !== owner)!

    // Load through the front while the owner dies: what each in-flight mutation is answered.
    const outcomes: Array<{ readonly id: string; readonly answer: Answer }> = []
    let loading = true
    const load = async () => {
      while (loading) {
        const id = invocationId()
        outcomes.push({ id, answer: await rpc(front, t, "Mutate", createProject("load", id)) })
      }
    }
    const loads = [load(), load(), load()]
    await new Promise((r) => setTimeout(r, 300))
    const killed = Date.now()
    await stopChild(owner, "SIGKILL")

    // The first commit after the kill, measured on a call made after it.
    let answer: Answer
    let attempts = 0
    for (;;) {
      attempts++
      answer = await rpc(front, t, "Mutate", createProject("After", invocationId()))
      if (answer.status === 200) break
      // Until the shard moves: the retryable refusal, never another error.
      expect(answer.status, answer.text).toBe(503)
      expect(answer.text).toContain("unavailable")
      if (Date.now() - killed > 60_000) throw new Error(`no takeover within 60 s: ${answer.text}`)
    }
    const failoverMs = Date.now() - killed
    loading = false
    await Promise.all(loads)
    expect(successOf(answer)?.outcome).toBe("committed")
    await waitFor("the survivor's log line", () => survivor.output().includes(`"requestId":"${answer.requestId}"`))

    // In flight at the kill: a receipt, or the retryable 503 (never a 500 or a hang); the same invocation again commits.
    const refused = outcomes.filter((o) => o.answer.status !== 200)
    for (const { answer: a } of refused) {
      expect(a.status, a.text).toBe(503)
      expect(a.text).toContain("unavailable")
    }
    for (const { id } of refused) expect(successOf(await rpc(front, t, "Mutate", createProject("load", id)))?.outcome).toBe("committed")
    console.log(
      `cluster-failover: ms_to_first_commit=${failoverMs} attempts=${attempts} in_flight_calls=${outcomes.length} answered_503=${refused.length} (lock expiration 3 s)`
    )

    // Nothing acknowledged went with the dead runner: the new owner rebuilt the database from the archive,
    // and every receipt the load was given replays identically there.
    const acknowledged = outcomes.filter((o) => o.answer.status === 200)
    expect(acknowledged.length).toBeGreaterThan(0)
    for (const { id, answer: a } of acknowledged) expect(successOf(await rpc(front, t, "Mutate", createProject("load", id)))).toEqual(successOf(a))
    const read = await rpc(survivor, t, "Query", { query: projects, atLeast: successOf(answer).position })
    expect(read.status, read.text).toBe(200)
    const names = successOf(read).rows.map((r: any) => r.name)
    expect(names).toContain("Before")
    expect(names).toContain("After")

    // With no runner left, the front's own deadline answers (the cluster would retry forever): retryable, by reference.
    await stopChild(survivor, "SIGKILL")
    const asked = Date.now()
    const orphaned = await rpc(front, t, "Mutate", createProject("Nowhere", invocationId()))
    expect(orphaned.status, orphaned.text).toBe(503)
    expect(JSON.parse(orphaned.text)).toMatchObject({ error: "unavailable", requestId: orphaned.requestId })
    expect(orphaned.text).toContain(`Your database did not answer in time; this was logged as ${orphaned.requestId}.`)
    expect(Date.now() - asked).toBeLessThan(10_000)
  })
})

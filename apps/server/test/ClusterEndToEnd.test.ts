// Cairn as a cluster on loopback: PostgreSQL (started here), two runners and one front of the
// real entry point (`apps/server/src/main.ts` with CAIRN_ROLE), beside an embedded server with
// the same settings as the oracle of every answer. Every process trusts one issuer (a shared
// HMAC key) and one public base URL, as behind a load balancer.
import { type Child, launchChild, stopChild } from "./support/child.js"
import { cairn } from "./support/cli.js"
import { mkdtempSync } from "node:fs"
import { request as httpRequest } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Postgres, postgresUnavailable, startPostgres } from "@cairn/testkit/Postgres"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { SignJWT } from "jose"
import { createProject, projects } from "./support/requests.js"
import { isClusterModule, moduleRecording } from "./support/modules.js"

const unavailable = postgresUnavailable()

const issuer = "https://issuer.cluster.test"
const tokenSecret = "cluster-test-token-secret-0123456789abcdef"
/** The deployment's public `host:port` (the front's), set once the front's port is chosen. */
let publicHost = ""
let uuidCounter = 0
/** A fresh UUIDv7-shaped invocation id. */
const invocationId = () => {
  const n = (Date.now() * 1000 + uuidCounter++).toString(16).padStart(12, "0").slice(-12)
  const r = Math.floor(Math.random() * 0xfff).toString(16).padStart(3, "0")
  return `${n.slice(0, 8)}-${n.slice(8, 12)}-7${r}-8000-${Math.floor(Math.random() * 2 ** 48).toString(16).padStart(12, "0")}`
}

interface Answer {
  readonly status: number
  readonly requestId: string
  readonly text: string
  readonly json: any
}

/**
 * One `/db/rpc` call to `server`, addressed as the public base URL (`Host`), as a load balancer
 * forwards it: every process serves the deployment's one public name.
 */
const rpc = (server: Pick<Child, "port">, token: string, tag: string, payload: unknown, path = "/db/rpc"): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] }) + (path === "/db/rpc" ? "" : "\n")
    const request = httpRequest(
      {
        host: "127.0.0.1",
        port: server.port,
        method: "POST",
        path,
        headers: { host: publicHost, "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${token}` }
      },
      (response) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (chunk) => (text += chunk))
        response.on("error", reject)
        response.on("end", () => {
          let json: unknown
          try {
            // `/db/rpc` answers one JSON document, `/db/sync` NDJSON lines.
            json = path === "/db/rpc" ? JSON.parse(text) : text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
          } catch {
            json = undefined
          }
          resolve({ status: response.statusCode ?? 0, requestId: String(response.headers["x-request-id"] ?? ""), text, json })
        })
      }
    )
    request.on("error", reject)
    request.end(body)
  })

/** The success value of an RPC answer, or undefined. */
const successOf = (answer: Answer): any => {
  const exit = (Array.isArray(answer.json) ? answer.json : [answer.json]).find((m: any) => m?._tag === "Exit")?.exit
  return exit?._tag === "Success" ? exit.value : undefined
}

/** An answer as a caller compares it: status and body, this request's id taken out. */
const comparable = (answer: Answer) => ({ status: answer.status, body: answer.text.replaceAll(answer.requestId, "<request-id>") })

const waitFor = async <A>(what: string, f: () => A | undefined | Promise<A | undefined>, timeoutMs = 5_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await f()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe("cluster settings", () => {
  it("cairn serve --role runner without its settings lists every missing one and exits 2", async () => {
    const ran = await cairn(["serve", "--role", "runner"], { CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-role-")), CAIRN_STAGE: "test" })
    expect(ran.code, ran.stderr).toBe(2)
    for (const name of ["CAIRN_CLUSTER_DATABASE_URL", "CAIRN_SECRET", "CAIRN_RUNNER_PORT"]) expect(ran.stderr).toContain(`${name} is required for CAIRN_ROLE=runner`)
  })
})

describe.skipIf(unavailable !== undefined)("cluster: two runners and a front", () => {
  let pg: Postgres
  let front: Child
  let runners: Array<Child> = []
  let embedded: Child
  const recording = moduleRecording()
  let frontBase: string
  const token = (org: string, scope = "cairn:read cairn:write") =>
    new SignJWT({ org, scope, roles: ["admin"] })
      .setProtectedHeader({ alg: "HS256", typ: "at+jwt" })
      .setIssuer(issuer)
      .setSubject("alice")
      .setAudience(`${frontBase}/db`)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(tokenSecret))

  beforeAll(async () => {
    pg = await startPostgres()
    const frontPort = await freePort()
    frontBase = `http://127.0.0.1:${frontPort}`
    publicHost = `127.0.0.1:${frontPort}`
    const common = {
      CAIRN_ISSUER: issuer,
      CAIRN_TOKEN_SECRET: tokenSecret,
      CAIRN_TOKEN_ALGORITHMS: "HS256",
      CAIRN_BASE_URL: frontBase,
      CAIRN_SECRET: "cluster-test-deployment-secret-0123456789",
      CAIRN_LOG_FORMAT: "json",
      CAIRN_SQLITE_SYNCHRONOUS: "NORMAL"
    }
    const cluster = {
      ...common,
      CAIRN_CLUSTER_DATABASE_URL: pg.createDatabase("cairn_cluster"),
      CAIRN_CLUSTER_SHARDS: "8",
      CAIRN_CLUSTER_LOCK_EXPIRATION: "3 seconds",
      CAIRN_CLUSTER_REFRESH_INTERVAL: "500 millis",
      CAIRN_CLUSTER_HEALTH_INTERVAL: "1 second",
      CAIRN_CLUSTER_SEND_TIMEOUT: "4 seconds",
      // The archive, the followed copies and the files: one object store every process shares.
      CAIRN_OBJECT_DIR: mkdtempSync(join(tmpdir(), "cairn-cluster-objects-"))
    }
    const dir = (name: string) => mkdtempSync(join(tmpdir(), `cairn-cluster-${name}-`))
    const runner = async (name: string, record: boolean) =>
      launchChild(
        "apps/server/src/main.ts",
        dir(name),
        { ...cluster, CAIRN_ROLE: "runner", CAIRN_RUNNER_PORT: String(await freePort()), ...(record ? recording.env : {}) },
        undefined,
        record ? recording.nodeArgs : []
      )
    runners = await Promise.all([runner("a", true), runner("b", false)])
    ;[front, embedded] = await Promise.all([
      launchChild("apps/server/src/main.ts", dir("front"), { ...cluster, CAIRN_ROLE: "front" }, { port: frontPort, issuer: "http://127.0.0.1:1" }),
      launchChild("apps/server/src/main.ts", dir("embedded"), common)
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.all([front, embedded, ...runners].filter((c) => c !== undefined).map((c) => stopChild(c, "SIGTERM")))
    pg?.stop()
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

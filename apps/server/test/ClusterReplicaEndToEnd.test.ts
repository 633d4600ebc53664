// Independently scalable reads and sync (issue #29): a `replica` process follows the databases it is
// asked about from the archive and answers query, snapshot and live changes without the writer. Its
// answer equals the writer's at the same position; read-your-writes holds across processes (a read
// at a receipt's position is never older, whichever process serves it); its live stream receives
// commits made through another process.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SyncClient } from "@cairn/client/SyncClient"
import { type SyncScope } from "@cairn/domain/Sync"
import { postgresUnavailable } from "@cairn/testkit/Postgres"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Schedule, Scope } from "effect"
import { type Balancer, startBalancer } from "./support/balancer.js"
import { type Cluster, type ClusterProcess, invocationId, startCluster, successOf, waitFor } from "./support/cluster.js"
import { createProject, projects } from "./support/requests.js"

const unavailable = postgresUnavailable()
const everything: SyncScope = { entities: [{ from: { kind: "entity", name: "Project" } }] }

describe.skipIf(unavailable !== undefined)("cluster: a replica serves reads and sync from the archive", () => {
  let cluster: Cluster
  let runner: ClusterProcess
  let replica: ClusterProcess
  let balancer: Balancer
  const scope = Effect.runSync(Scope.make())

  beforeAll(async () => {
    cluster = await startCluster()
    ;[runner, replica] = await Promise.all([cluster.start("runner", "runner"), cluster.start("replica", "replica")])
    // The public name leads to the replica: what a client of the deployment's URL reaches.
    balancer = await startBalancer(Number(new URL(cluster.base).port), () => [replica.child.port])
  }, 120_000)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await balancer?.close()
    await cluster?.stop()
  }, 60_000)

  const entityReads = (requestId: string) =>
    runner.child.output().split("\n").some((l) => l.includes(`"requestId":"${requestId}"`) && /entity (query|snapshot)/.test(l))

  it("answers as the writer at the same position, and never older than a receipt it is given", async () => {
    const t = await cluster.token("replica-a")
    let last: any
    for (let i = 0; i < 5; i++) last = successOf(await cluster.rpc(runner, t, "Mutate", createProject(`p${i}`, invocationId())))
    expect(last?.outcome).toBe("committed")

    // At the last receipt's position: the replica's answer (from its copy) equals the writer's own. A
    // position no copy can reach makes the front ask the entity, which answers from the database itself.
    const atLeast = last.position
    const fromReplica = await cluster.rpc(replica, t, "Query", { query: projects, atLeast })
    const fromWriter = await cluster.rpc(replica, t, "Query", { query: projects, atLeast: "c00zzzz" })
    expect(fromReplica.status, fromReplica.text).toBe(200)
    expect(fromWriter.status, fromWriter.text).toBe(200)
    await waitFor("the writer's entity query line", () => entityReads(fromWriter.requestId) || undefined)
    expect(entityReads(fromReplica.requestId)).toBe(false)
    expect(successOf(fromReplica).basis.position).toBe(atLeast)
    expect(successOf(fromReplica)).toEqual(successOf(fromWriter))

    // Read your writes, right after each write through another process: never an older answer.
    for (let i = 0; i < 10; i++) {
      const receipt = successOf(await cluster.rpc(runner, t, "Mutate", createProject(`ryw${i}`, invocationId())))
      const read = await cluster.rpc(replica, t, "Query", { query: { ...projects, page: { first: 100 } }, atLeast: receipt.position })
      expect(read.status, read.text).toBe(200)
      expect(successOf(read).basis.position >= receipt.position).toBe(true)
      expect(successOf(read).rows.map((r: any) => r.name)).toContain(`ryw${i}`)
    }

    // Snapshot pages from the replica equal the writer process's once both stand at the same position.
    const [a, b] = await waitFor("both processes' copies at one position", async () => {
      const pages = await Promise.all([replica, runner].map((p) => cluster.rpc(p, t, "SyncSnapshot", { scope: everything, atLeast: last.position }, "/db/sync")))
      const [x, y] = pages.map(successOf)
      return x.checkpoint.position === y.checkpoint.position ? [x, y] : undefined
    })
    expect(a.records).toEqual(b.records)
    expect(a.records.length).toBe(15)
  })

  it("a live sync client on the replica receives commits made through the runner", async () => {
    const t = await cluster.token("replica-b")
    successOf(await cluster.rpc(runner, t, "Mutate", createProject("first", invocationId())))
    const client = await Effect.runPromise(
      Effect.gen(function* () {
        const rpc = yield* SyncClient.http({ url: `${cluster.base}/db/sync`, token: Effect.succeed(t) })
        const made = yield* SyncClient.make({
          file: join(mkdtempSync(join(tmpdir(), "cairn-replica-sync-")), "b.sqlite"),
          scope: everything,
          rpc,
          retry: Schedule.spaced("200 millis")
        })
        yield* Effect.forkIn(made.run, scope)
        return made
      }).pipe(Scope.extend(scope))
    )
    const names = () =>
      Effect.runPromise(
        Effect.map(client.store.dump, (records) => [...records.entries()].filter(([k]) => k.startsWith("Project/")).map(([, r]) => String(r["name"])).sort())
      )
    await waitFor("the snapshot on the replica", async () => (JSON.stringify(await names()) === JSON.stringify(["first"]) ? true : undefined), 20_000)
    for (const name of ["second", "third"]) successOf(await cluster.rpc(runner, t, "Mutate", createProject(name, invocationId())))
    await waitFor("the runner's commits on the replica's live stream", async () =>
      JSON.stringify(await names()) === JSON.stringify(["first", "second", "third"]) ? true : undefined, 20_000)
  })
})

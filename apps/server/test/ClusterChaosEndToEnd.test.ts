// The cluster under chaos, as issue #29's proof asks: PostgreSQL, an S3-compatible server (s3rver)
// and three runner processes on loopback behind a TCP load balancer; mixed load over 50 tenant
// databases and live sync clients; one runner SIGKILLed mid-load AND its data directory deleted.
// Then: every acknowledged receipt replays identically; each database's log is one gap-free order
// (its acknowledged positions are exactly 1..n, its rows exactly the acknowledged creates, its
// archive's segments continuous); every live sync client converges to a fresh query (the oracle).
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SyncClient } from "@cairn/client/SyncClient"
import { type SyncScope } from "@cairn/domain/Sync"
import * as Position from "@cairn/domain/Position"
import { postgresUnavailable } from "@cairn/testkit/Postgres"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Fiber, Redacted, Schedule, Scope } from "effect"
import S3rver from "s3rver"
import { type Balancer, startBalancer } from "./support/balancer.js"
import { type Cluster, type ClusterProcess, invocationId, rpc, startCluster, successOf, waitFor } from "./support/cluster.js"
import { createProject, projects } from "./support/requests.js"

const unavailable = postgresUnavailable()
const tenants = Array.from({ length: 50 }, (_, i) => `chaos-${i}`)
const synced = tenants.slice(0, 5)
const everything: SyncScope = { entities: [{ from: { kind: "entity", name: "Project" } }] }

interface Acknowledged {
  readonly org: string
  readonly payload: ReturnType<typeof createProject>
  readonly receipt: any
}

describe.skipIf(unavailable !== undefined)("cluster chaos: three runners, 50 tenants, a runner and its disk lost mid-load", () => {
  let cluster: Cluster
  let balancer: Balancer
  let s3: S3rver
  const runners: Array<ClusterProcess> = []
  const dead = new Set<ClusterProcess>()
  const syncScope = Effect.runSync(Scope.make())

  beforeAll(async () => {
    const s3Port = await freePort()
    s3 = new S3rver({ port: s3Port, address: "127.0.0.1", silent: true, directory: mkdtempSync(join(tmpdir(), "cairn-chaos-s3-")), configureBuckets: [{ name: "cairn" }] })
    await s3.run()
    cluster = await startCluster({
      env: {
        CAIRN_OBJECT_STORE: "s3",
        CAIRN_S3_BUCKET: "cairn",
        CAIRN_S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
        CAIRN_S3_FORCE_PATH_STYLE: "true",
        CAIRN_S3_ACCESS_KEY_ID: "S3RVER",
        CAIRN_S3_SECRET_ACCESS_KEY: "S3RVER",
        // Snapshots now and then, so takeovers rebuild from a snapshot plus segments, not from the first commit.
        CAIRN_ARCHIVE_SNAPSHOT_EVERY: "25"
      }
    })
    runners.push(...(await Promise.all([cluster.start("runner", "r0"), cluster.start("runner", "r1"), cluster.start("runner", "r2")])))
    // The deployment's public name: a balancer over the runners still alive (every process takes requests).
    balancer = await startBalancer(Number(new URL(cluster.base).port), () => runners.filter((r) => !dead.has(r)).map((r) => r.child.port))
  }, 180_000)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(syncScope, Exit.void))
    await balancer?.close()
    await cluster?.stop()
    await s3?.close()
  }, 60_000)

  /** A mutation sent until it is answered: the same payload (same invocationId) after every retryable refusal or dropped connection. */
  const mutate = async (token: string, payload: ReturnType<typeof createProject>) => {
    const deadline = Date.now() + 60_000
    let last = "no answer"
    for (;;) {
      try {
        const answer = await rpc({ port: balancer.port }, cluster.publicHost, token, "Mutate", payload)
        last = answer.text
        const receipt = successOf(answer)
        if (answer.status === 200 && receipt !== undefined) return receipt
        // Only "not now" is acceptable: anything else is a defect of the cluster.
        if (answer.status !== 503) throw new Error(`unexpected answer ${answer.status}: ${answer.text}`)
      } catch (error) {
        if (error instanceof Error && error.message.startsWith("unexpected answer")) throw error
      }
      if (Date.now() > deadline) {
        for (const p of cluster.processes) console.log(`${p.name} (last errors):`, p.child.output().split("\n").filter((l) => /ERROR|WARN|rror/.test(l)).slice(-15).join("\n"))
        throw new Error(`a mutation was not answered within 60 s: ${last}`)
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  it("every acknowledged receipt survives and replays identically; each log is one gap-free order; sync clients converge", async () => {
    const tokens = new Map(await Promise.all(tenants.map(async (org) => [org, await cluster.token(org)] as const)))

    // Live sync clients of five tenants, through the balancer: they resume from their cursors wherever they land.
    const clients = await Effect.runPromise(
      Effect.forEach(synced, (org) =>
        Effect.gen(function* () {
          const rpcClient = yield* SyncClient.http({ url: `${cluster.base}/db/sync`, token: Effect.succeed(tokens.get(org)!) })
          const client = yield* SyncClient.make({
            file: join(mkdtempSync(join(tmpdir(), "cairn-chaos-sync-")), `${org}.sqlite`),
            scope: everything,
            rpc: rpcClient,
            retry: Schedule.spaced("200 millis")
          })
          const fiber = yield* Effect.forkIn(client.run, syncScope)
          return [org, Object.assign(client, { fiber })] as const
        })
      ).pipe(Scope.extend(syncScope))
    )

    // Mixed load: creates and queries over the 50 tenants from 12 concurrent callers.
    const acknowledged: Array<Acknowledged> = []
    let loading = true
    let queries = 0
    const caller = async (n: number) => {
      let i = n
      while (loading) {
        const org = tenants[(i * 7 + n) % tenants.length]!
        i++
        if (i % 4 === 0) {
          const answer = await rpc({ port: balancer.port }, cluster.publicHost, tokens.get(org)!, "Query", { query: projects }).catch(() => undefined)
          if (answer !== undefined && answer.status !== 503) expect(answer.status, answer.text).toBe(200)
          queries++
          continue
        }
        const payload = createProject(`p-${n}-${i}`, invocationId())
        acknowledged.push({ org, payload, receipt: await mutate(tokens.get(org)!, payload) })
      }
    }
    const callers = Array.from({ length: 12 }, (_, n) => caller(n))
    // Under way on every tenant (each one's first call creates it), then a while longer.
    await waitFor("load on every tenant", () => new Set(acknowledged.map((a) => a.org)).size === tenants.length || undefined, 90_000)
    await new Promise((r) => setTimeout(r, 2_000))

    // A runner dies with its disk: SIGKILL, then its data directory is deleted.
    const victim = runners[1]!
    dead.add(victim)
    const before = acknowledged.length
    await cluster.kill(victim, { wipe: true })
    await new Promise((r) => setTimeout(r, 8_000))
    loading = false
    await Promise.all(callers)
    expect(before).toBeGreaterThanOrEqual(tenants.length)
    expect(acknowledged.length).toBeGreaterThan(before)

    // Every acknowledged receipt replays identically (the same invocation again answers the stored receipt).
    for (const { org, payload, receipt } of acknowledged) expect(await mutate(tokens.get(org)!, payload)).toEqual(receipt)

    // One gap-free order per database: its acknowledged positions are exactly 1..n and its rows exactly the acknowledged creates.
    const byOrg = new Map<string, Array<Acknowledged>>()
    for (const a of acknowledged) byOrg.set(a.org, [...(byOrg.get(a.org) ?? []), a])
    for (const [org, list] of byOrg) {
      const positions = list.map((a) => Position.decode(a.receipt.position)!).sort((a, b) => a - b)
      expect(positions, org).toEqual(positions.map((_, i) => i + 1))
      const top = Position.encode(positions[positions.length - 1]!)
      const read = await rpc({ port: balancer.port }, cluster.publicHost, tokens.get(org)!, "Query", { query: { ...projects, page: { first: 200 } }, atLeast: top })
      expect(read.status, read.text).toBe(200)
      expect(successOf(read).rows.map((r: any) => r.name).sort(), org).toEqual(list.map((a) => a.payload.input.name).sort())
    }

    // Each archive is continuous: per database, seqs 1..n without a gap, each segment starting where the last ended.
    const archive = await archiveOf(cluster)
    for (const [id, segments] of archive) {
      let at: number | undefined
      segments.forEach((s, i) => {
        if (i > 0) expect(s.seq, id).toBe(segments[i - 1]!.seq + 1)
        if (at !== undefined) expect(s.from, id).toBe(at)
        at = s.to
      })
    }

    // Live sync clients converge to the oracle (a fresh query at the latest acknowledged position).
    for (const [org, client] of clients) {
      const expected = (byOrg.get(org) ?? []).map((a) => a.payload.input.name).sort()
      const deadline = Date.now() + 30_000
      for (;;) {
        const local = await Effect.runPromise(
          Effect.map(client.store.dump, (records) => [...records.entries()].filter(([key]) => key.startsWith("Project/")).map(([, r]) => String(r["name"])).sort())
        )
        if (JSON.stringify(local) === JSON.stringify(expected)) break
        if (Date.now() > deadline) {
          const status = await Effect.runPromise(client.status.get)
          console.log("sync client not converged:", org, JSON.stringify(status), JSON.stringify(await Effect.runPromise(Fiber.poll(client.fiber))))
          for (const p of cluster.processes) console.log(`${p.name} (last errors):`, p.child.output().split("\n").filter((l) => /copy|follow|archive|sync|Sync|error|Error/.test(l)).slice(-30).join("\n"))
          expect(local, `sync client of ${org}`).toEqual(expected)
        }
        await new Promise((r) => setTimeout(r, 200))
      }
    }
    console.log(
      `cluster-chaos: tenants=${tenants.length} acknowledged=${acknowledged.length} (before the kill ${before}) queries=${queries} replayed=${acknowledged.length} sync_clients=${clients.length} converged`
    )
  }, 240_000)
})

/** The archive's segment index, per database, in seq order (read from the cluster's PostgreSQL). */
const archiveOf = async (cluster: Cluster) => {
  const rows = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const sql = yield* PgClient.make({ url: Redacted.make(cluster.env["CAIRN_CLUSTER_DATABASE_URL"]!) })
        return yield* sql<{ db_id: string; generation: number; seq: string; first_position: string; last_position: string }>`
          SELECT db_id, generation, seq, first_position, last_position FROM cairn_archive_segments ORDER BY db_id, generation, seq`
      })
    ).pipe(Effect.provide(Reactivity.layer))
  )
  const byDb = new Map<string, Array<{ seq: number; from: number; to: number }>>()
  for (const r of rows) {
    const key = `${r.db_id}/${r.generation}`
    byDb.set(key, [...(byDb.get(key) ?? []), { seq: Number(r.seq), from: Number(r.first_position), to: Number(r.last_position) }])
  }
  return byDb
}

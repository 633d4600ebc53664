/**
 * `npm run bench -- cluster`: Cairn as a cluster on loopback (the test harness,
 * apps/server/test/support/cluster.ts: PostgreSQL, the real entry point with CAIRN_ROLE=runner, one
 * shared filesystem object store), each runner also taking HTTP requests (front).
 *
 * - `cluster: runners=<n> mutate_ops=<n> query_qps=<n>` for 1, 2 and 3 runners, each on a fresh
 *   cluster: `ORGS` tenant databases (created and read once on every runner before measuring),
 *   `CLIENTS` closed-loop keep-alive HTTP clients in this process spread evenly over the runners,
 *   each call to a random tenant, one in `WRITE_EVERY` a `Project.create` (acknowledged only once its
 *   group is in the archive), the others a page of 20 projects (served from the process's followed
 *   copy). Both numbers are per second over the same `SECONDS` for every configuration.
 * - `cluster-scale: ratio_3_vs_1=<r> cores=<n>`: calls per second at 3 runners over 1. Every process,
 *   PostgreSQL and this driver share the machine's cores, so the next line projects separate machines
 *   from the runners' measured CPU per call (see `projection`).
 *   These clusters keep the production shard lock expiration (see `throughputEnv`).
 * - `cluster-failover: ms_to_first_commit=<n>`: a fresh 3-runner cluster with the harness's short lock
 *   expiration (3 s) and 50 tenants, under the same load sent to the two survivors only (as a load
 *   balancer would): SIGKILL the runner that owns one tenant (and delete its data directory), then the
 *   time from the kill to the first acknowledged commit on that tenant, among `Project.create`s sent
 *   every 50 ms from the kill on.
 * - `cluster-ack: ratio_shipped_vs_local=<r>`: store level, in this process (the measurement that was
 *   packages/cluster/test/ArchiveThroughput.test.ts): acknowledged `Project.create`s per second
 *   through `Databases` with `PgArchive` (segment put in a filesystem object store + PostgreSQL head)
 *   over the same store with `Archive.local`, same data layout and `synchronous`, alternating rounds.
 *
 * Every answer is checked; anything but the success asked for is counted by verb and status and
 * printed (`refused=`). Noisy shared machine: PostgreSQL here runs with fsync off (the test kit's),
 * the object store is a local directory (fsynced), so the archive's cost here is CPU and round trips,
 * not a network or S3 latency. Knobs: BENCH_CLUSTER_SECONDS, BENCH_CLUSTER_ORGS, BENCH_CLUSTER_CLIENTS,
 * BENCH_CLUSTER_RUNNERS (e.g. `3`: only those configurations; the ratios need 1,2,3),
 * BENCH_CLUSTER_TRACE (every failover probe's answer), BENCH_CLUSTER_PROFILE=<dir> (runners' CPU profiles).
 */
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Redacted } from "effect"
import { v7 as uuidv7 } from "uuid"
import { compile } from "@cairn/catalog/Catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { makeFilesystem, ObjectStore } from "@cairn/store/ObjectStore"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import * as PgArchive from "@cairn/cluster/archive/PgArchive"
import { startPostgres } from "@cairn/testkit/Postgres"
import { tracker } from "@cairn/tracker/tracker"
import { trackerHandlers } from "@cairn/tracker/handlers"
import { type Cluster, type ClusterProcess, invocationId, startCluster } from "../../apps/server/test/support/cluster.js"
import { createProject, projects } from "../../apps/server/test/support/requests.js"
import { call, cpuSeconds, postgresCpu, shardsSettled, Tally, type Target, target } from "./support/clusterLoad.js"

const SECONDS = Number(process.env["BENCH_CLUSTER_SECONDS"] ?? 8)
const ORGS = Number(process.env["BENCH_CLUSTER_ORGS"] ?? 200)
// Divisible by 1, 2 and 3: every runner gets the same number of clients.
const CLIENTS = Number(process.env["BENCH_CLUSTER_CLIENTS"] ?? 48)
const WRITE_EVERY = 4
const SHARDS = 48
const CORES = availableParallelism()

/** Tenants of the failover cluster (as the issue's kill test). */
const FAILOVER_ORGS = 50

/**
 * Every process of every configuration. CAIRN_MAX_OPEN_DATABASES above ORGS: a runner keeps all of
 * its tenants open in every configuration, so adding runners does not also relieve cache pressure
 * (which would flatter the scaling). More shards than the harness's 16, so that 200 tenants spread
 * evenly enough over 3 runners.
 */
const clusterEnv = { CAIRN_CLUSTER_SHARDS: String(SHARDS), CAIRN_MAX_OPEN_DATABASES: String(ORGS * 2) }

/**
 * The throughput configurations keep the production lock expiration (10 s; the harness's 3 s is for
 * fast takeovers in tests). A runner renews its shard locks every third of it and, when a renewal
 * takes longer than that, drops every shard it holds ("Shard lock storage is unhealthy"): with 3 s, a
 * runner starved for a second on this shared machine lets its tenants move mid-measurement (fenced
 * ships, rebuilds, 503s), and the run measures the neighbours' load instead of the cluster.
 */
const throughputEnv = { ...clusterEnv, CAIRN_CLUSTER_LOCK_EXPIRATION: "10 seconds" }

const orgName = (i: number) => `org-${i}`
const page = { ...projects, page: { first: 20 } }

interface Running {
  readonly cluster: Cluster
  readonly runners: Array<ClusterProcess>
  readonly tokens: ReadonlyArray<string>
}

const startRunners = async (n: number, orgs: number, env: Readonly<Record<string, string>>): Promise<Running> => {
  // BENCH_CLUSTER_PROFILE=<dir>: every runner writes a V8 CPU profile there when it stops.
  const profile = process.env["BENCH_CLUSTER_PROFILE"]
  const cluster = await startCluster({ env, ...(profile ? { nodeArgs: () => ["--cpu-prof", `--cpu-prof-dir=${profile}`] } : {}) })
  try {
    const runners = await Promise.all(Array.from({ length: n }, (_, i) => cluster.start("runner", `r${i}`)))
    await shardsSettled(cluster.pg.port, n)
    const tokens = await Promise.all(Array.from({ length: orgs }, (_, i) => cluster.token(orgName(i))))
    return { cluster, runners, tokens }
  } catch (e) {
    await cluster.stop()
    throw e
  }
}

/** `count` calls of `f`, `concurrency` at a time. */
const inParallel = async (count: number, concurrency: number, f: (i: number) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await f(next++)
    })
  )
}

/**
 * Creates every tenant (its first commit: install, first snapshot) and reads it once through every
 * runner (each materializes its followed copy), so that the measurement starts warm everywhere.
 */
const warm = async ({ cluster, runners, tokens }: Running, targets: ReadonlyArray<Target>) => {
  const tally = new Tally()
  const orgs = tokens.length
  await inParallel(orgs, 16, async (i) => {
    // The same invocation again after a refusal: it commits at most once.
    const payload = createProject(`seed ${i}`, invocationId())
    for (let attempt = 0; attempt < 3; attempt++) {
      if (tally.record("Mutate", await call(targets[i % targets.length]!, cluster.publicHost, tokens[i]!, "Mutate", payload))) break
    }
  })
  await inParallel(orgs * runners.length, 16, async (k) => {
    const i = k % orgs
    for (let attempt = 0; attempt < 3; attempt++) {
      if (tally.record("Query", await call(targets[Math.floor(k / orgs)]!, cluster.publicHost, tokens[i]!, "Query", { query: page }))) break
    }
  })
  if (tally.mutations < orgs || tally.queries < orgs * runners.length) throw new Error(`warm-up refused: ${tally.examples().join("\n")}`)
  if (tally.refused > 0) console.log(`cluster-warm: runners=${runners.length} refused then retried: ${tally.summary()}`)
}

/** `CLIENTS` closed loops over `targets` (client c on target c mod n) until `stop()` answers true. */
const drive = async (cluster: Cluster, tokens: ReadonlyArray<string>, targets: ReadonlyArray<Target>, tally: Tally, stop: () => boolean) => {
  let name = 0
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const to = targets[c % targets.length]!
      for (let k = c; !stop(); k++) {
        const i = Math.floor(Math.random() * tokens.length)
        if (k % WRITE_EVERY === 0) {
          tally.record("Mutate", await call(to, cluster.publicHost, tokens[i]!, "Mutate", createProject(`p${name++}`, invocationId())))
        } else {
          tally.record("Query", await call(to, cluster.publicHost, tokens[i]!, "Query", { query: page }))
        }
      }
    })
  )
}

interface Measured {
  readonly runners: number
  readonly mutateOps: number
  readonly queryQps: number
  readonly tally: Tally
  /** CPU per successful call, microseconds: all runners, PostgreSQL, this driver. */
  readonly runnerCpuUs: number
  readonly pgCpuUs: number
  readonly driverCpuUs: number
  /** Without load, after the warm-up: percent of one core, all runners together and PostgreSQL. */
  readonly idleRunnerPct: number
  readonly idlePgPct: number
}

const measure = async (running: Running, targets: ReadonlyArray<Target>): Promise<Measured> => {
  const { cluster, runners, tokens } = running
  const pg = postgresCpu(cluster.pg.port)
  const runnerCpu = () => runners.reduce((s, r) => s + cpuSeconds(r.child.child.pid!), 0)
  // What the cluster costs with no calls at all (shard refresh, health checks, copies polling the archive).
  const idle = { runner: runnerCpu(), pg: pg(), at: performance.now() }
  await new Promise((r) => setTimeout(r, 2_000))
  const idleSeconds = (performance.now() - idle.at) / 1000
  const idleRunnerPct = ((runnerCpu() - idle.runner) / idleSeconds) * 100
  const idlePgPct = ((pg() - idle.pg) / idleSeconds) * 100
  // A short unmeasured load first: JIT, pools, keep-alive sockets.
  const warmDeadline = performance.now() + 1_000
  await drive(cluster, tokens, targets, new Tally(), () => performance.now() > warmDeadline)
  const before = { runner: runnerCpu(), pg: pg(), driver: process.cpuUsage() }
  const tally = new Tally()
  const began = performance.now()
  const deadline = began + SECONDS * 1000
  await drive(cluster, tokens, targets, tally, () => performance.now() > deadline)
  const seconds = (performance.now() - began) / 1000
  const driver = process.cpuUsage(before.driver)
  const calls = Math.max(1, tally.mutations + tally.queries)
  return {
    runners: runners.length,
    mutateOps: tally.mutations / seconds,
    queryQps: tally.queries / seconds,
    tally,
    runnerCpuUs: ((runnerCpu() - before.runner) * 1e6) / calls,
    pgCpuUs: ((pg() - before.pg) * 1e6) / calls,
    driverCpuUs: (driver.user + driver.system) / calls,
    idleRunnerPct,
    idlePgPct
  }
}

/** The runner whose log holds `requestId`'s entity line: the one that ran the call. */
const ranOn = async (runners: ReadonlyArray<ClusterProcess>, requestId: string): Promise<ClusterProcess> => {
  const deadline = Date.now() + 5_000
  for (;;) {
    const found = runners.find((r) => r.child.output().split("\n").some((l) => l.includes(`"requestId":"${requestId}"`) && l.includes("entity mutate")))
    if (found) return found
    if (Date.now() > deadline) throw new Error(`no runner logged ${requestId}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The runners' WARN/ERROR log lines so far, by message (JSON logs, see the harness). */
const runnerWarnings = (runners: ReadonlyArray<ClusterProcess>) => {
  const counts = new Map<string, number>()
  for (const r of runners) {
    for (const line of r.child.output().split("\n")) {
      if (!line.includes(`"logLevel":"WARN`) && !line.includes(`"logLevel":"ERROR`) && !line.includes(`"logLevel":"FATAL`)) continue
      let message = line.slice(0, 120)
      try {
        const parsed = JSON.parse(line) as { message: unknown; logLevel: string }
        message = `${parsed.logLevel} ${String(Array.isArray(parsed.message) ? parsed.message[0] : parsed.message).slice(0, 120)}`
      } catch {
        // not JSON: kept as printed
      }
      counts.set(message, (counts.get(message) ?? 0) + 1)
      if (process.env["BENCH_CLUSTER_TRACE"] !== undefined && counts.get(message)! <= 2) console.log(`  ${r.name}: ${line.slice(0, 3000)}`)
    }
  }
  return counts
}

interface Failover {
  readonly ms: number
  readonly tally: Tally
  readonly probe: Tally
  readonly probes: number
  /** The longest a probe sent after the kill waited for its answer. */
  readonly longestProbeMs: number
  readonly lockExpiration: string
}

const PROBE_EVERY_MS = 50

/**
 * SIGKILL (and wipe) the runner owning tenant 0 under load through the two others. From the kill on,
 * a new `Project.create` on tenant 0 every `PROBE_EVERY_MS` (open loop, through the survivors: a call
 * stuck on the dead owner does not hold back the next one, as with many clients); the time from the
 * kill to the first acknowledged commit among them.
 */
const failover = async (running: Running, targets: ReadonlyArray<Target>): Promise<Failover> => {
  const { cluster, runners, tokens } = running
  const payload = createProject("owner?", invocationId())
  let first = await cluster.rpc(runners[0]!, tokens[0]!, "Mutate", payload)
  for (let attempt = 0; first.status !== 200 && attempt < 3; attempt++) first = await cluster.rpc(runners[0]!, tokens[0]!, "Mutate", payload)
  if (first.status !== 200) throw new Error(`failover: the first call was refused: ${first.text}`)
  const owner = await ranOn(runners, first.requestId)
  const survivors = targets.filter((_, i) => runners[i] !== owner)
  const tally = new Tally()
  const probe = new Tally()
  let done = false
  const load = drive(cluster, tokens, survivors, tally, () => done)
  await new Promise((r) => setTimeout(r, 1_000))
  const killedAt = performance.now()
  await cluster.kill(owner, { wipe: true })
  let committedAt: number | undefined
  let longest = 0
  const sent: Array<Promise<void>> = []
  const trace = process.env["BENCH_CLUSTER_TRACE"] !== undefined
  while (committedAt === undefined && performance.now() - killedAt < 60_000) {
    const at = performance.now()
    const to = survivors[sent.length % survivors.length]!
    sent.push(
      call(to, cluster.publicHost, tokens[0]!, "Mutate", createProject("probe", invocationId())).then((answer) => {
        const now = performance.now()
        longest = Math.max(longest, now - at)
        if (probe.record("Mutate", answer) && committedAt === undefined) committedAt = now
        if (trace) console.log(`probe sent=${(at - killedAt).toFixed(0)} answered=${(now - killedAt).toFixed(0)} status=${answer.status}`)
      })
    )
    await new Promise((r) => setTimeout(r, PROBE_EVERY_MS))
  }
  // Every probe answered (the stuck ones after the send timeout), and the other moved tenants back under load.
  await Promise.all(sent)
  done = true
  await load
  if (committedAt === undefined) throw new Error(`failover: no commit on the moved tenant within 60 s: ${probe.examples().join("\n")}`)
  return {
    ms: committedAt - killedAt,
    tally,
    probe,
    probes: sent.length,
    longestProbeMs: longest,
    lockExpiration: cluster.env["CAIRN_CLUSTER_LOCK_EXPIRATION"] ?? "?"
  }
}

// --- cluster-ack: the store with and without shipping ----------------------------------------------

const ACK_DATABASES = 4
const ACK_CONCURRENCY = 64
const ACK_ROUND_SECONDS = 3
const ACK_ROUNDS = 2

const catalog = Effect.runSync(compile(tracker))
const view = View.full(catalog)
const principal = (key: string) => new Principal({ subject: "bench", roles: [], scopes: [], claims: {}, databaseKey: DatabaseKey.make(key) })

const storeOver = <E>(dataDir: string, archive: Layer.Layer<Archive, E>) =>
  Databases.Default.pipe(
    Layer.provide(archive),
    Layer.provide(StoreConfig.layer({ dataDir })),
    Layer.provide(OperationCatalog.layer(catalog, trackerHandlers)),
    // The benchmark measures acknowledgement, not policy: every invocation is allowed.
    Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void })),
    Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
  )

const createIn = (key: string, n: number) =>
  Effect.flatMap(Databases, (d) =>
    d.withDatabase(DatabaseKey.make(key), (database) =>
      mutate({
        view,
        principal: principal(key),
        database,
        request: { operation: operationRef("Project", "create"), input: { name: `p${n}` }, invocationId: InvocationId.make(uuidv7()) }
      })
    )
  ).pipe(Effect.orDie)

/** Acknowledged creates per second over `ACK_ROUND_SECONDS`, `ACK_CONCURRENCY` submitters over the databases. */
const ackRound = (runtime: ManagedRuntime.ManagedRuntime<Databases, unknown>) =>
  runtime.runPromise(
    Effect.gen(function* () {
      let done = 0
      const began = performance.now()
      const deadline = began + ACK_ROUND_SECONDS * 1000
      yield* Effect.forEach(
        Array.from({ length: ACK_CONCURRENCY }, (_, c) => c),
        (c) =>
          Effect.whileLoop({
            while: () => performance.now() < deadline,
            body: () => createIn(`ack-${c % ACK_DATABASES}`, done),
            step: () => void done++
          }),
        { concurrency: "unbounded", discard: true }
      )
      return done / ((performance.now() - began) / 1000)
    })
  )

const ack = async () => {
  const pg = await startPostgres()
  const dirs = Array.from({ length: 3 }, () => mkdtempSync(join(tmpdir(), "cairn-bench-ack-")))
  const local = ManagedRuntime.make(storeOver(dirs[0]!, Archive.local))
  const shipped = ManagedRuntime.make(
    storeOver(
      dirs[1]!,
      PgArchive.layerWith(PgArchive.defaults).pipe(
        Layer.provide(Layer.succeed(ObjectStore, makeFilesystem(dirs[2]!))),
        Layer.provide(PgClient.layer({ url: Redacted.make(pg.createDatabase("ack")) }))
      )
    )
  )
  try {
    for (const runtime of [local, shipped]) {
      // Each database created (install; the first snapshot when shipped) before any round.
      await runtime.runPromise(Effect.forEach(Array.from({ length: ACK_DATABASES }, (_, i) => i), (i) => createIn(`ack-${i}`, i)))
      await ackRound(runtime)
    }
    let bestLocal = 0
    let bestShipped = 0
    for (let round = 0; round < ACK_ROUNDS; round++) {
      bestLocal = Math.max(bestLocal, await ackRound(local))
      bestShipped = Math.max(bestShipped, await ackRound(shipped))
    }
    return { local: bestLocal, shipped: bestShipped }
  } finally {
    await Promise.all([local.dispose(), shipped.dispose()])
    pg.stop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
}

// --- the run ----------------------------------------------------------------------------------------

/**
 * On separate machines, each runner would have this machine's cores to itself and PostgreSQL its
 * own: the cluster's calls per second would be bounded by the runners' CPU per call. Projected
 * ratio: n × (runner CPU per call at 1) / (runner CPU per call at n) — what each added runner costs
 * the others (the hop to a tenant's owner, one more followed copy per tenant to keep current).
 * It assumes PostgreSQL and the object store keep up, and ignores network latency.
 */
const projection = (one: Measured, n: Measured) => (n.runners * one.runnerCpuUs) / n.runnerCpuUs

/** Starts `n` runners over `orgs` tenants, warms them, runs `body`, stops everything. */
const withCluster = async <A>(n: number, orgs: number, env: Readonly<Record<string, string>>, body: (running: Running, targets: ReadonlyArray<Target>) => Promise<A>) => {
  const running = await startRunners(n, orgs, env)
  const targets = running.runners.map((r) => target(r.child.port, CLIENTS))
  try {
    await warm(running, targets)
    return await body(running, targets)
  } finally {
    for (const t of targets) t.agent.destroy()
    await running.cluster.stop()
  }
}

const printWarnings = (label: string, runners: ReadonlyArray<ClusterProcess>) => {
  const warnings = runnerWarnings(runners)
  console.log(`cluster-warnings: ${label} ${warnings.size === 0 ? "none" : [...warnings.entries()].map(([m, c]) => `${c}x ${m}`).join(" | ")}`)
}

export const run = async (): Promise<void> => {
  const started = performance.now()
  const results: Array<Measured> = []
  const configurations = (process.env["BENCH_CLUSTER_RUNNERS"] ?? "1,2,3").split(",").map(Number)
  for (const n of configurations) {
    const began = performance.now()
    const m = await withCluster(n, ORGS, throughputEnv, async (running, targets) => {
      const m = await measure(running, targets)
      printWarnings(`runners=${n}`, running.runners)
      return m
    })
    results.push(m)
    console.log(`cluster: runners=${n} mutate_ops=${m.mutateOps.toFixed(0)} query_qps=${m.queryQps.toFixed(0)}`)
    console.log(
      `cluster-detail: runners=${n} orgs=${ORGS} clients=${CLIENTS} seconds=${SECONDS} refused=${m.tally.refused} (${m.tally.summary()}) ` +
        `cpu_us_per_call runners=${m.runnerCpuUs.toFixed(0)} postgres=${m.pgCpuUs.toFixed(0)} driver=${m.driverCpuUs.toFixed(0)} ` +
        `idle_cpu_pct runners=${m.idleRunnerPct.toFixed(0)} postgres=${m.idlePgPct.toFixed(0)} loadavg_1m=${loadavg()[0]!.toFixed(1)} wall_s=${((performance.now() - began) / 1000).toFixed(0)}`
    )
    for (const e of m.tally.examples()) console.log(`  refused ${e}`)
  }
  if (results.length === 3) {
    const [one, , three] = results as [Measured, Measured, Measured]
    const total = (m: Measured) => m.mutateOps + m.queryQps
    console.log(`cluster-scale: ratio_3_vs_1=${(total(three) / total(one)).toFixed(2)} cores=${CORES}`)
    console.log(
      `cluster-scale-separate: projected_ratio_3_vs_1=${projection(one, three).toFixed(2)} (each runner on its own machine: 3 x runner cpu per call at 1 runner / at 3; ` +
        `here ${CORES} cores are shared by the runners, PostgreSQL and the driver)`
    )
  }
  if (configurations.includes(3)) {
    // The harness's short lock expiration (3 s): a takeover in seconds, as the tests expect.
    const f = await withCluster(3, FAILOVER_ORGS, clusterEnv, async (running, targets) => {
      const f = await failover(running, targets)
      printWarnings("failover", running.runners)
      return f
    })
    console.log(`cluster-failover: ms_to_first_commit=${f.ms.toFixed(0)}`)
    console.log(
      `cluster-failover-detail: lock_expiration="${f.lockExpiration}" orgs=${FAILOVER_ORGS} probes=${f.probes} every_ms=${PROBE_EVERY_MS} ` +
        `longest_probe_ms=${f.longestProbeMs.toFixed(0)} probe_refused=${f.probe.refused} (${f.probe.summary()}) ` +
        `load_ok=${f.tally.mutations + f.tally.queries} load_refused=${f.tally.refused} (${f.tally.summary()})`
    )
    for (const e of [...f.probe.examples(), ...f.tally.examples()]) console.log(`  refused ${e}`)
  }
  const a = await ack()
  console.log(`cluster-ack: ratio_shipped_vs_local=${(a.shipped / a.local).toFixed(3)}`)
  console.log(
    `cluster-ack-detail: store level (Databases with PgArchive vs Archive.local) shipped_ops=${a.shipped.toFixed(0)} local_ops=${a.local.toFixed(0)} ` +
      `databases=${ACK_DATABASES} concurrency=${ACK_CONCURRENCY} total_s=${((performance.now() - started) / 1000).toFixed(0)}`
  )
}

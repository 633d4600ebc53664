/**
 * `npm run bench -- writer`: durable committed `Task.create` operations per second
 * through `mutate` on one database (256 concurrent submitters, so group commit has
 * something to group) against raw better-sqlite3 writing the same rows (task, commit,
 * receipt) in one transaction per operation, same WAL file layout and `synchronous`.
 * Prints `writer: ops/s=.. baseline=.. ratio=.. cpu_us_per_op=.. baseline_cpu_us_per_op=.. ops_per_group=..`
 * (writer / raw; CPU time of the process, user + system, per committed operation in the best
 * round; invocations per group commit, i.e. acknowledged writes per fsync).
 *
 * `BENCH_PROFILE=<dir>`: after the measured rounds, one more writer round (`BENCH_PROFILE_SECONDS`,
 * default 5) under V8's sampling profiler, written to `<dir>/writer.cpuprofile`. Run it as
 * `NODE_OPTIONS= npx tsx scripts/bench.ts writer` after `npm run build` so that @cairn/* resolves
 * to the compiled dist/ (real line numbers).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { Effect, Layer, Logger, LogLevel, ManagedRuntime, Metric } from "effect"
import { v7 as uuidv7 } from "uuid"
import { newInvocationId } from "@cairn/client/InvocationId"
import { compile } from "@cairn/catalog/Catalog"
import { digest } from "@cairn/catalog/Digest"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import { Layout, Log, Position, Writer } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig, storeDefaults } from "@cairn/store/StoreConfig"
import { tracker } from "@cairn/tracker/tracker"
import { trackerHandlers } from "@cairn/tracker/handlers"

const SUBMITTERS = 256
const ROUND_SECONDS = 2
const ROUNDS = 3
const SYNCHRONOUS = storeDefaults.synchronous

const catalog = Effect.runSync(compile(tracker))
const view = View.full(catalog)
const principal = new Principal({ subject: "bench", roles: [], scopes: [], claims: {}, databaseKey: DatabaseKey.make("bench") })

/** As the DataPlane calls `mutate`: the principal's database held (`withDatabase`) for each call. */
const invoke = (request: Parameters<typeof mutate>[0]["request"]) =>
  Effect.flatMap(Databases, (d) => d.withDatabase(principal.databaseKey, (database) => mutate({ view, principal, request, database })))

const taskCreate = (projectId: string, n: number) =>
  invoke({
    operation: operationRef("Task", "create"),
    input: { projectId, title: `task ${n}`, priority: (n % 5) + 1 },
    // As a client of Cairn makes them (`@cairn/client`): the id is generated where the intent is.
    invocationId: InvocationId.make(newInvocationId())
  })

/** Rounds of committed `Task.create` operations through `mutate`; each answers operations per second. */
const writerRounds = async (dataDir: string) => {
  const runtime = ManagedRuntime.make(
    Databases.Default.pipe(
      Layer.provide(StoreConfig.layer({ dataDir, synchronous: SYNCHRONOUS })),
      Layer.provide(Archive.local),
      Layer.provide(OperationCatalog.layer(catalog, trackerHandlers)),
      // The benchmark measures the writer, not the policy: every invocation is allowed.
      Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void })),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const project = await runtime.runPromise(
    invoke({ operation: operationRef("Project", "create"), input: { name: "Bench" }, invocationId: InvocationId.make(uuidv7()) })
  )
  const projectId = (project.output as { readonly id: string }).id
  const round = (seconds: number) =>
    Effect.gen(function* () {
      let committed = 0
      const deadline = performance.now() + seconds * 1000
      const submitter = Effect.gen(function* () {
        while (performance.now() < deadline) {
          const receipt: Receipt = yield* taskCreate(projectId, committed)
          if (receipt.outcome !== "committed") return yield* Effect.dieMessage("not committed")
          committed += 1
        }
      })
      const start = performance.now()
      const cpu = process.cpuUsage()
      const groups = yield* Metric.value(Writer.groupSize)
      yield* Effect.all(Array.from({ length: SUBMITTERS }, () => submitter), { concurrency: "unbounded", discard: true })
      const used = process.cpuUsage(cpu)
      const after = yield* Metric.value(Writer.groupSize)
      return {
        rate: committed / ((performance.now() - start) / 1000),
        cpuPerOp: (used.user + used.system) / committed,
        perGroup: (after.sum - groups.sum) / Math.max(1, after.count - groups.count)
      }
    })
  return { round: (seconds: number) => runtime.runPromise(round(seconds)), close: () => runtime.dispose() }
}

/** Rounds of the same rows with raw better-sqlite3, one transaction per operation. */
const baselineRounds = (filename: string) => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma(`synchronous = ${SYNCHRONOUS}`)
  for (const ddl of [...Log.ddl, ...Layout.catalogDdl(catalog)]) db.exec(ddl)
  const task = catalog.entity("Task")!
  const project = catalog.entity("Project")!
  const columns = ["id", ...task.fields.map((f) => f.name)]
  const insertTask = db.prepare(`INSERT INTO "Task" (${columns.map(Layout.quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
  const getProject = db.prepare(`SELECT * FROM "Project" WHERE "id" = ?`)
  const insertCommit = db.prepare(
    `INSERT INTO ${Log.commitsTable} (position, invocation_id, operation, target_entity, target_id, intent, subject, receipt, changes, committed_at) VALUES (?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?)`
  )
  const insertReceipt = db.prepare(`INSERT INTO ${Log.receiptsTable} (invocation_id, intent, outcome, position, receipt) VALUES (?, ?, 'committed', ?, ?)`)
  const projectId = uuidv7()
  const now = new Date().toISOString()
  db.prepare(`INSERT INTO "Project" ("id", "name", "archived", "createdAt", "updatedAt") VALUES (?, 'Bench', 0, ?, ?)`).run(projectId, now, now)
  let position = 0
  const operation = db.transaction((n: number) => {
    const found = getProject.get(projectId) as Record<string, unknown> | undefined
    if (!found || Layout.decodeRecord(project, found)["archived"] === true) throw new Error("project missing")
    const at = new Date().toISOString()
    const id = uuidv7()
    const invocationId = uuidv7()
    const record = Layout.encodeRecord(task, { id, projectId, title: `task ${n}`, status: "open", priority: (n % 5) + 1, createdAt: at, updatedAt: at })
    insertTask.run(...columns.map((c) => record[c] ?? null))
    position += 1
    const intent = digest({ subject: "bench", operation: "Task.create", target: null, input: { projectId, title: `task ${n}` } })
    const receipt = JSON.stringify({
      invocationId,
      operation: operationRef("Task", "create"),
      outcome: "committed",
      output: { id },
      position: Position.encode(position),
      committedAt: at,
      catalogToken: catalog.token
    })
    const changes = JSON.stringify([{ entity: "Task", id, before: null, after: Layout.decodeRecord(task, record) }])
    insertCommit.run(position, invocationId, "Task.create", intent, "bench", receipt, changes, at)
    insertReceipt.run(invocationId, intent, position, receipt)
  })
  const round = (seconds: number) => {
    let n = 0
    const start = performance.now()
    const cpu = process.cpuUsage()
    const deadline = start + seconds * 1000
    while (performance.now() < deadline) operation(n++)
    const used = process.cpuUsage(cpu)
    return { rate: n / ((performance.now() - start) / 1000), cpuPerOp: (used.user + used.system) / n, perGroup: 1 }
  }
  return { round: async (seconds: number) => round(seconds), close: async () => db.close() }
}

export const run = async (): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-writer-"))
  try {
    const raw = baselineRounds(join(dir, "baseline.sqlite"))
    const cairn = await writerRounds(join(dir, "cairn"))
    // Warm up (JIT, prepared statements), then alternate rounds: the disk's fsync latency
    // drifts on a shared machine, and both sides should see the same drift. Best of each.
    await raw.round(0.5)
    await cairn.round(0.5)
    type Round = { readonly rate: number; readonly cpuPerOp: number; readonly perGroup: number }
    const best = (a: Round | undefined, b: Round) => (a === undefined || b.rate > a.rate ? b : a)
    let baseline: Round | undefined
    let writer: Round | undefined
    for (let i = 0; i < ROUNDS; i++) {
      baseline = best(baseline, await raw.round(ROUND_SECONDS))
      writer = best(writer, await cairn.round(ROUND_SECONDS))
    }
    const profile = process.env["BENCH_PROFILE"]
    if (profile) {
      const session = new Session()
      session.connect()
      await session.post("Profiler.enable")
      await session.post("Profiler.start")
      await cairn.round(Number(process.env["BENCH_PROFILE_SECONDS"] ?? 5))
      const { profile: cpuProfile } = await session.post("Profiler.stop")
      mkdirSync(profile, { recursive: true })
      writeFileSync(join(profile, "writer.cpuprofile"), JSON.stringify(cpuProfile))
      session.disconnect()
    }
    await raw.close()
    await cairn.close()
    console.log(
      `writer: ops/s=${writer!.rate.toFixed(0)} baseline=${baseline!.rate.toFixed(0)} ratio=${(writer!.rate / baseline!.rate).toFixed(2)} ` +
        `cpu_us_per_op=${writer!.cpuPerOp.toFixed(0)} baseline_cpu_us_per_op=${baseline!.cpuPerOp.toFixed(0)} ops_per_group=${writer!.perGroup.toFixed(1)}`
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

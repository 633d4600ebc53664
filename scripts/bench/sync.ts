/**
 * `npm run bench -- sync`: (1) one commit delivered to 1,000 live sync clients over
 * loopback HTTP (NDJSON), each a member of the project, from just before the commit to
 * each client's receipt: `sync-fanout: clients=1000 p50_ms=.. p99_ms=.. server_cpu_us_per_client=..` (the
 * server process's CPU over the rounds, per client and commit), and the writer's
 * acknowledgement of one commit with the 1,000 streams live over none:
 * `sync-ack: ratio_1000_vs_0=..` (the clients run in a child process,
 * `support/syncClients.ts`, and report arrival times on the shared clock); (2) resuming
 * a cursor 100 commits behind in a database of 10k versus 1M tasks (resume work must
 * not grow with the table): `sync-resume: ratio_1M_vs_10k=..`.
 */
import { fork } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import Database from "better-sqlite3"
import { Chunk, Effect, Layer, Logger, LogLevel, ManagedRuntime, Redacted, Stream } from "effect"
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { v7 as uuidv7 } from "uuid"
import { compile } from "@cairn/catalog/Catalog"
import { Sealer } from "@cairn/catalog/Sealer"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationId } from "@cairn/domain/Ids"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { type SyncScope } from "@cairn/domain/Sync"
import { Policy } from "@cairn/policy"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { Layout } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { databaseId, Databases } from "@cairn/store/Databases"
import { mutate } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import { BearerGate } from "@cairn/server/http/BearerGate"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { DatabaseRouter } from "@cairn/server/engine/DatabaseRouter"
import { DatabasesLive } from "@cairn/server/engine/DatabasesLive"
import { DbRoutes } from "@cairn/server/http/DbRoutes"
import { Deployment } from "@cairn/server/engine/Deployment"
import { EngineLimitsLive } from "@cairn/server/engine/EngineLimits"
import { FrontMiddleware } from "@cairn/server/http/FrontMiddleware"
import { identityLayer } from "@cairn/server/auth/IdentityLive"
import { Limits } from "@cairn/server/http/Limits"
import { serve } from "@cairn/server/http/Server"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { Sync } from "@cairn/sync/Sync"
import { SyncConfig } from "@cairn/sync/SyncConfig"
import { freePort } from "@cairn/testkit/freePort"
import { tracker } from "@cairn/tracker/tracker"
import { trackerDeployment } from "@cairn/tracker/application"
import { trackerHandlers } from "@cairn/tracker/handlers"
import { trackerPolicy } from "@cairn/tracker/policy"

const CLIENTS = 1000
const clientsScript = join(dirname(fileURLToPath(import.meta.url)), "support", "syncClients.ts")
interface ChildReply {
  readonly ready?: true
  readonly title?: string
  readonly arrivals?: ReadonlyArray<number>
}
const ROUNDS = 3
const ORG = DatabaseKey.make("org-bench")
const AT = "2026-01-01T00:00:00.000Z"

const policy = Effect.runSync(Effect.orDie(Effect.flatMap(compile(tracker), (c) => Policy.compile(c, trackerPolicy))))
const catalog = policy.catalog
const owner = new Principal({ subject: "owner", roles: [], claims: {}, scopes: [], databaseKey: ORG })
const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }

const storeLayer = (dataDir: string) =>
  Databases.Default.pipe(
    Layer.provide(StoreConfig.layer({ dataDir, maxOpenDatabases: 4 })),
    Layer.provide(Archive.local),
    Layer.provide(OperationCatalog.layer(catalog, trackerHandlers)),
    // The benchmark measures sync: the owner's setup writes are allowed without policy.
    Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void }))
  )
const engineLayer = (dataDir: string) =>
  Layer.merge(
    storeLayer(dataDir),
    Sync.Default.pipe(Layer.provide([Sealer.layer(Redacted.make("bench-secret-0123456789abcdef0123")), SyncConfig.layer({}), QueryLimits.layer()]))
  )

const invoke = (name: string, input: unknown, target?: string) =>
  Effect.scoped(
    Effect.flatMap(
      Effect.flatMap(Databases, (d) => d.activate(owner.databaseKey)),
      (database) =>
        mutate({
          view: View.full(catalog),
          principal: owner,
          database,
          request: {
            operation: operationRef(name.split(".")[0]!, name.split(".")[1]!),
            input,
            invocationId: InvocationId.make(uuidv7()),
            ...(target !== undefined ? { target: { kind: "entity" as const, entity: name.split(".")[0]!, id: target } } : {})
          }
        })
    )
  ).pipe(Effect.orDie, Effect.map((r) => (r.output as { readonly id?: string } | undefined)?.id ?? ""))

/** Creates the database through the store (installed, with its owner's project), then closes it. */
const create = (dataDir: string, setup: Effect.Effect<Record<string, string>, never, Databases>) =>
  Effect.runPromise(Effect.scoped(setup).pipe(Effect.provide(storeLayer(dataDir)), Logger.withMinimumLogLevel(LogLevel.Warning)))

/** Raw inserts into the closed database file, in one transaction. */
const insertRaw = (dataDir: string, entity: string, records: Iterable<Record<string, unknown>>) => {
  const db = new Database(join(dataDir, "databases", `${databaseId(ORG)}.sqlite`))
  const compiled = catalog.entity(entity)!
  const columns = ["id", ...compiled.fields.map((f) => f.name)]
  const insert = db.prepare(`INSERT INTO ${Layout.tableName(compiled)} (${columns.map(Layout.quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
  db.transaction(() => {
    for (const record of records) {
      const stored = Layout.encodeRecord(compiled, record)
      insert.run(...columns.map((c) => stored[c] ?? null))
    }
  })()
  db.close()
}

function* members(projectId: string, subjects: Iterable<string>) {
  for (const subject of subjects) yield { id: `m-${projectId}-${subject}`, projectId, subject, role: "viewer", createdAt: AT, updatedAt: AT }
}

/** `BENCH_SYNC_PROFILE=<file>`: a CPU profile of the server process during the fan-out rounds only. */
const startProfile = async () => {
  const { Session } = await import("node:inspector/promises")
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  // Fine samples: the three rounds take well under a second of CPU.
  await session.post("Profiler.setSamplingInterval", { interval: 100 })
  await session.post("Profiler.start")
  return async (file: string) => {
    const { profile } = await session.post("Profiler.stop")
    const { writeFileSync } = await import("node:fs")
    writeFileSync(file, JSON.stringify(profile))
    session.disconnect()
  }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!

export const fanout = async (): Promise<void> => {
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-sync-"))
  try {
    const { project, task } = await create(
      dataDir,
      Effect.gen(function* () {
        const project = yield* invoke("Project.create", { name: "Fanout" })
        const task = yield* invoke("Task.create", { projectId: project, title: "Watched" })
        return { project, task }
      })
    )
    insertRaw(dataDir, "Member", members(project, Array.from({ length: CLIENTS }, (_, i) => `u${i}`)))

    // The real /db routes over the real engine, with a bench issuer's tokens.
    const port = await Effect.runPromise(freePort())
    const base = `http://127.0.0.1:${port}`
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
    const publicJwk = { ...(await exportJWK(publicKey)), alg: "ES256" }
    const settings = onLoopback({ port, dataDir })
    const identity = identityLayer({
      issuers: [{ issuer: "https://bench.issuer", keys: { _tag: "Jwks", keys: [publicJwk] }, algorithms: ["ES256"] }],
      audiences: { db: `${base}/db`, mcp: `${base}/mcp` },
      clockToleranceSeconds: 5,
      databases: [{ name: "tenants", keyClaim: "org", legacyKeys: true }],
      rolesClaim: "roles"
    })
    const engine = DataPlane.Default.pipe(Layer.provide(EngineLimitsLive), Layer.provide([DatabaseRouter.local, DatabasesLive]))
    const app = serve(Layer.mergeAll(FrontMiddleware, DbRoutes)).pipe(
      Layer.provide([BearerGate.Default, Limits.layer()]),
      Layer.provideMerge(engine),
      Layer.provide(identity),
      Layer.provide([Sealer.layer(Redacted.make("bench-secret-0123456789abcdef0123")), Deployment.layer(trackerDeployment)]),
      Layer.provide(Settings.layer(settings))
    )
    const runtime = ManagedRuntime.make(app.pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))))
    const rename = (title: string) =>
      Effect.flatMap(DataPlane, (plane) =>
        plane.mutate(new Principal({ subject: "owner", roles: ["admin"], claims: {}, scopes: ["cairn:write"], databaseKey: ORG }), {
          operation: operationRef("Task", "rename"),
          input: { title },
          target: { kind: "entity", entity: "Task", id: task },
          invocationId: uuidv7()
        })
      ).pipe(Effect.orDie)
    try {
      await runtime.runPromise(Effect.void)
      const url = `${base}/db/sync`
      const tokens = await Promise.all(
        Array.from({ length: CLIENTS }, (_, i) =>
          new SignJWT({ org: ORG, scope: "cairn:read" })
            .setProtectedHeader({ alg: "ES256", typ: "at+jwt" })
            .setSubject(`u${i}`)
            .setIssuer("https://bench.issuer")
            .setAudience(`${base}/db`)
            .setIssuedAt()
            .setExpirationTime("1h")
            .sign(privateKey)
        )
      )
      const samples: Array<number> = []
      /** Milliseconds until the writer acknowledges one rename (median of `n`). */
      const ackMillis = (n: number, prefix: string) =>
        Effect.gen(function* () {
          const times: Array<number> = []
          for (let i = 0; i < n; i++) {
            const start = performance.now()
            yield* rename(`${prefix} ${i}`)
            times.push(performance.now() - start)
            // Let the streams deliver it before the next one (as the fan-out rounds do).
            yield* Effect.sleep("50 millis")
          }
          return times.sort((a, b) => a - b)[Math.floor(n / 2)]!
        })
      const ackAlone = await runtime.runPromise(ackMillis(15, "Alone"))
      let ackWithStreams = 0
      let cpuPerClient = 0
      // The clients run in their own process: this one runs only the server.
      const child = fork(clientsScript, [], { execArgv: ["--conditions=@cairn/source", "--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] })
      const replies: Array<ChildReply> = []
      let wake: (() => void) | undefined
      let failed: Error | undefined
      child.on("message", (reply: ChildReply) => {
        replies.push(reply)
        wake?.()
      })
      child.on("exit", (code) => {
        failed = new Error(`the sync clients exited (${code})`)
        wake?.()
      })
      const reply = async (): Promise<ChildReply> => {
        while (replies.length === 0) {
          if (failed) throw failed
          await new Promise<void>((resolve) => (wake = resolve))
        }
        return replies.shift()!
      }
      try {
        child.send({ url, tokens })
        await reply() // every client caught up and live
        const profiler = process.env["BENCH_SYNC_PROFILE"] ? await startProfile() : undefined
        // CPU this (server) process spends on the rounds: steadier than latency on a shared machine.
        const cpuBefore = process.cpuUsage()
        for (let round = 0; round < ROUNDS; round++) {
          const title = `Round ${round}`
          const start = performance.timeOrigin + performance.now()
          await runtime.runPromise(rename(title))
          child.send({ title })
          const answer = await reply()
          for (const at of answer.arrivals ?? []) samples.push(at - start)
        }
        const cpu = process.cpuUsage(cpuBefore)
        cpuPerClient = (cpu.user + cpu.system) / (ROUNDS * CLIENTS)
        if (process.env["BENCH_SYNC_CPU"]) console.log(`user_us=${(cpu.user / (ROUNDS * CLIENTS)).toFixed(1)} sys_us=${(cpu.system / (ROUNDS * CLIENTS)).toFixed(1)}`)
        if (profiler) await profiler(process.env["BENCH_SYNC_PROFILE"]!)
        ackWithStreams = await runtime.runPromise(ackMillis(15, "Watched"))
      } finally {
        child.removeAllListeners("exit")
        child.kill()
      }
      samples.sort((a, b) => a - b)
      console.log(`sync-fanout: clients=${CLIENTS} p50_ms=${percentile(samples, 50).toFixed(1)} p99_ms=${percentile(samples, 99).toFixed(1)} server_cpu_us_per_client=${cpuPerClient.toFixed(1)}`)
      console.log(
        `sync-ack: ratio_1000_vs_0=${(ackWithStreams / ackAlone).toFixed(2)} (median ack ${ackWithStreams.toFixed(1)}ms with ${CLIENTS} live streams, ${ackAlone.toFixed(1)}ms with none)`
      )
    } finally {
      await runtime.dispose()
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Median milliseconds of a resume over 100 commits (50 visible) in a database of `rows` tasks. */
const resumeCost = async (rows: number) => {
  const dataDir = mkdtempSync(join(tmpdir(), "cairn-bench-resume-"))
  try {
    const { project } = await create(
      dataDir,
      Effect.map(invoke("Project.create", { name: "Mine" }), (project) => ({ project }))
    )
    const reader = new Principal({ subject: "reader", roles: [], claims: {}, scopes: [], databaseKey: ORG })
    insertRaw(dataDir, "Member", members(project, ["reader"]))
    const PROJECTS = 1000
    insertRaw(dataDir, "Project", (function* () {
      for (let p = 0; p < PROJECTS; p++) yield { id: `p${p}`, name: `Other ${p}`, archived: false, createdAt: AT, updatedAt: AT }
    })())
    insertRaw(dataDir, "Task", (function* () {
      for (let i = 0; i < rows; i++) {
        // 100 of the tasks are in the reader's project; the rest spread over other projects.
        const projectId = i < 100 ? project : `p${i % PROJECTS}`
        yield { id: `t${String(i).padStart(8, "0")}`, projectId, title: `task ${i}`, status: "open", priority: 1 + (i % 5), createdAt: AT, updatedAt: AT }
      }
    })())

    const runtime = ManagedRuntime.make(engineLayer(dataDir).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))))
    try {
      return await runtime.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const sync = yield* Sync
            const db = yield* Effect.orDie((yield* Databases).activate(ORG))
            const view = policy.view(reader)
            let after: string | undefined
            let cursor: string | undefined
            while (cursor === undefined) {
              const page = yield* sync.snapshot(reader, view, db, { scope: tasks, ...(after ? { after } : {}) })
              cursor = page.checkpoint?.cursor
              after = page.next
            }
            // 100 commits: 50 renames the reader sees, 50 in other projects.
            for (let i = 0; i < 100; i++) {
              const id = i % 2 === 0 ? `t${String(i).padStart(8, "0")}` : `t${String(rows - 1 - i).padStart(8, "0")}`
              yield* invoke("Task.rename", { title: `renamed ${i}` }, id)
            }
            const once = Effect.gen(function* () {
              const start = performance.now()
              const messages = Chunk.toReadonlyArray(yield* Stream.runCollect(sync.changes(reader, view, db, { scope: tasks, cursor: cursor!, live: false })))
              const elapsed = performance.now() - start
              const batch = messages[0]
              if (batch?._tag !== "SyncBatch" || batch.changes.length !== 50) return yield* Effect.dieMessage("unexpected resume")
              return elapsed
            })
            for (let i = 0; i < 5; i++) yield* once // warm up
            const times: Array<number> = []
            for (let i = 0; i < 30; i++) times.push(yield* once)
            times.sort((a, b) => a - b)
            return percentile(times, 50)
          })
        )
      )
    } finally {
      await runtime.dispose()
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** `BENCH_SYNC_ONLY=fanout` runs the fan-out alone (e.g. to compare two builds, run after run). */
export const run = async (): Promise<void> => {
  await fanout()
  if (process.env["BENCH_SYNC_ONLY"] === "fanout") return
  const small = await resumeCost(10_000)
  const large = await resumeCost(1_000_000)
  console.log(`sync-resume: ratio_1M_vs_10k=${(large / small).toFixed(3)} (10k=${small.toFixed(2)}ms 1M=${large.toFixed(2)}ms)`)
}

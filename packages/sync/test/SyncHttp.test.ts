// The Node sync client against a real HTTP front on 127.0.0.1: local SQLite files,
// bearer tokens, NDJSON streaming, disconnects and resumes.
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Chunk, Effect, Exit, Fiber, Logger, LogLevel, Metric, Option, Scope, Stream } from "effect"
import * as fc from "fast-check"
import { SyncClient } from "@cairn/client/SyncClient"
import type { SyncScope } from "@cairn/domain/Sync"
import { Log } from "@cairn/store"
import { type Databases } from "@cairn/store/Databases"
import { SyncMetrics } from "@cairn/sync"
import { Sync } from "@cairn/sync/Sync"
import { startServer, type SyncServer } from "./support/server.js"
import { attempt, database, everything, idOf, ORG, run, tempDir, visibleTo, who } from "./support/tracker.js"

const alice = who("alice")
const admin = who("erin", { roles: ["admin"] })

const onServer = <A, E, R>(server: SyncServer, effect: Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.provide(effect, server.engine)) as Effect.Effect<A, E, Exclude<R, Databases | Sync | Scope.Scope>>

const oracle = (server: SyncServer, subject: string, options: { roles?: ReadonlyArray<string>; org?: string; scope?: SyncScope } = {}) =>
  onServer(
    server,
    Effect.flatMap(database(options.org), (db) =>
      visibleTo(db, who(subject, { ...(options.roles ? { roles: options.roles } : {}), ...(options.org ? { org: options.org } : {}) }), options.scope)
    )
  )

const seed = (server: SyncServer, org = ORG) =>
  onServer(
    server,
    Effect.gen(function* () {
      const as = (subject: string) => who(subject, { org })
      const p1 = idOf(yield* run(as("alice"), "Project", "create", { name: "Apollo" }))
      const p2 = idOf(yield* run(as("bob"), "Project", "create", { name: "Borealis" }))
      const carolMember = idOf(yield* run(as("alice"), "Member", "add", { projectId: p1, subject: "carol", role: "viewer", email: "carol@example.com" }))
      const t1 = idOf(yield* run(as("alice"), "Task", "create", { projectId: p1, title: "Launch" }))
      yield* run(as("bob"), "Task", "create", { projectId: p2, title: "Secret" })
      return { p1, p2, carolMember, t1 }
    })
  )

const client = (server: SyncServer, file: string, subject: string, options: { roles?: ReadonlyArray<string>; org?: string; scope?: SyncScope } = {}) =>
  Effect.gen(function* () {
    const token = yield* server.token(subject, options)
    const rpc = yield* SyncClient.http({ url: server.url, token: Effect.succeed(token) })
    return yield* SyncClient.make({ file, scope: options.scope ?? everything, rpc })
  })

const count = (metric: Metric.Metric.Counter<number>) => Effect.map(Metric.value(metric), (s) => s.count)

describe("sync client over HTTP", () => {
  it.scopedLive("snapshots into its file, restores it, resumes from its cursor, and its live query follows changes", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir, { pageRows: 2 })
      const { p1, t1 } = yield* seed(server)
      const file = join(dir, "carol.sqlite")

      yield* Effect.scoped(
        Effect.gen(function* () {
          const carol = yield* client(server, file, "carol")
          yield* carol.syncOnce
          assert.deepStrictEqual(yield* carol.store.dump, yield* oracle(server, "carol"))
          const titles = yield* carol.live("Task").pipe(
            Stream.map((rows) => rows.map((r) => r.record["title"])),
            Stream.takeUntil((ts) => ts.includes("Renamed")),
            Stream.runCollect,
            Effect.fork
          )
          yield* Effect.forkScoped(carol.run)
          yield* onServer(server, run(alice, "Task", "rename", { title: "Renamed" }, t1))
          const seen = Chunk.toReadonlyArray(yield* Fiber.join(titles))
          assert.deepStrictEqual(seen[0], ["Launch"])
          assert.deepStrictEqual(seen[seen.length - 1], ["Renamed"])
        })
      )

      const pages = yield* count(SyncMetrics.snapshotPages)
      const resumes = yield* count(SyncMetrics.resumes)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const carol = yield* client(server, file, "carol")
          // Restored from disk before any request.
          assert.isTrue(Option.isSome(yield* carol.store.state))
          assert.deepStrictEqual((yield* carol.store.records("Task")).map((r) => r.record["title"]), ["Renamed"])
          const t2 = idOf(yield* onServer(server, run(alice, "Task", "create", { projectId: p1, title: "Second" })))
          yield* carol.syncOnce
          assert.strictEqual(yield* count(SyncMetrics.snapshotPages), pages)
          assert.strictEqual(yield* count(SyncMetrics.resumes), resumes + 1)
          assert.isTrue((yield* carol.store.records("Task")).some((r) => r.id === t2))
          assert.deepStrictEqual(yield* carol.store.dump, yield* oracle(server, "carol"))
          assert.strictEqual((yield* carol.status.get).resnapshots, 0)
        })
      )
    }))

  it.scopedLive("never merges a stored snapshot of another principal: the server refuses the cursor, the client checks the identity", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir)
      yield* seed(server)
      const file = join(dir, "shared.sqlite")
      yield* Effect.scoped(Effect.flatMap(client(server, file, "carol"), (c) => c.syncOnce))

      yield* Effect.scoped(
        Effect.gen(function* () {
          const bob = yield* client(server, file, "bob")
          yield* bob.syncOnce
          assert.strictEqual((yield* bob.status.get).resnapshots, 1)
          assert.deepStrictEqual(yield* bob.store.dump, yield* oracle(server, "bob"))
        })
      )

     // The file now holds bob's data; pretend its stored identity says someone else.
      const local = new Database(file)
      local.prepare(`UPDATE sync_checkpoint SET subject = 'mallory'`).run()
      local.close()
      const refusedBefore = yield* count(SyncMetrics.resnapshots)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const bob = yield* client(server, file, "bob")
          yield* bob.syncOnce
         // The server resumed the cursor (it is bob's); the client saw the identity differ and started over.
          assert.strictEqual(yield* count(SyncMetrics.resnapshots), refusedBefore)
          assert.strictEqual((yield* bob.status.get).resnapshots, 1)
          assert.strictEqual(Option.getOrThrow((yield* bob.store.state)).checkpoint.subject, "bob")
          assert.deepStrictEqual(yield* bob.store.dump, yield* oracle(server, "bob"))
        })
      )
    }))

  it.scopedLive("a revoked membership removes the project's rows from a live client", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir)
      const { carolMember } = yield* seed(server)
      const carol = yield* client(server, join(dir, "carol.sqlite"), "carol")
      yield* carol.syncOnce
      assert.isAbove((yield* carol.store.records("Task")).length, 0)
      const tasks = yield* carol.live("Task").pipe(Stream.takeUntil((rows) => rows.length === 0), Stream.runCollect, Effect.fork)
      yield* Effect.forkScoped(carol.run)
      yield* onServer(server, run(alice, "Member", "remove", {}, carolMember))
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(tasks))
      assert.deepStrictEqual(seen[seen.length - 1], [])
      yield* carol.status.changes.pipe(Stream.takeUntil((s) => s.resnapshots === 1 && Option.isSome(s.checkpoint)), Stream.runDrain)
      assert.deepStrictEqual(yield* carol.store.dump, new Map())
      assert.deepStrictEqual(yield* oracle(server, "carol"), new Map())
    }))

  it.scopedLive("a compacted log sends the client through a resnapshot", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir, { retainedCommits: 1 })
      const { t1 } = yield* seed(server)
      const carol = yield* client(server, join(dir, "carol.sqlite"), "carol")
      yield* carol.syncOnce
      for (const title of ["a", "b", "c"]) yield* onServer(server, run(alice, "Task", "rename", { title }, t1))
      // Compaction is the store's job on its own schedule; this runs it now.
      const dropped = yield* onServer(server, Effect.flatMap(database(), (db) => db.compact))
      assert.isAbove(dropped, 0)
      assert.strictEqual(yield* onServer(server, Effect.flatMap(database(), (db) => Effect.orDie(Log.watermark(db.reader)))), 7)
      yield* carol.syncOnce
      assert.strictEqual((yield* carol.status.get).resnapshots, 1)
      assert.deepStrictEqual(yield* carol.store.dump, yield* oracle(server, "carol"))
    }))
})

type Op =
  | { readonly _tag: "write"; readonly kind: number; readonly a: number; readonly b: number }
  | { readonly _tag: "toggle"; readonly client: number }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  // Membership grants (4) and revocations (5) are what incremental filtering cannot express: weigh them up.
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("write" as const), kind: fc.constantFrom(0, 1, 2, 3, 4, 4, 5, 5), a: fc.nat(30), b: fc.nat(30) }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("toggle" as const), client: fc.nat(3) }) }
)

const openTasks: SyncScope = {
  entities: [
    { from: { kind: "entity", name: "Project" } },
    { from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["status"], value: "open" } }
  ]
}

describe("convergence over HTTP", () => {
  it.scopedLive("clients with different roles, disconnecting and resuming at random, end with exactly what they may see", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const server = yield* startServer(dir, { pageRows: 3 })
      const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)
      let runNo = 0
      const property = (ops: ReadonlyArray<Op>) =>
        Effect.gen(function* () {
          const org = `org-run-${runNo++}`
          const as = (subject: string, roles: ReadonlyArray<string> = []) => who(subject, { org, roles })
          const people = [
            { subject: "carol", roles: [] as ReadonlyArray<string>, scope: everything },
            { subject: "dave", roles: [] as ReadonlyArray<string>, scope: openTasks },
            { subject: "erin", roles: ["admin"] as ReadonlyArray<string>, scope: everything },
            { subject: "bob", roles: [] as ReadonlyArray<string>, scope: everything }
          ]
          const sessions: Array<Scope.CloseableScope | undefined> = people.map(() => undefined)
          const files = people.map((p) => join(dir, `${org}-${p.subject}.sqlite`))
          const projects = [idOf(yield* onServer(server, run(as("alice"), "Project", "create", { name: "P0" })))]
          const tasks: Array<string> = []
          const members: Array<string> = []
          const eAdmin = as("erin", ["admin"])
          const subjects = ["carol", "dave", "bob"]
          const toggle = (i: number) =>
            Effect.gen(function* () {
              const open = sessions[i]
              if (open) {
                yield* Scope.close(open, Exit.void)
                sessions[i] = undefined
                return
              }
              const scope = yield* Scope.make()
              const p = people[i]!
              const c = yield* client(server, files[i]!, p.subject, { roles: p.roles, org, scope: p.scope }).pipe(Scope.extend(scope))
              yield* Effect.forkIn(c.run, scope)
              sessions[i] = scope
            })
          // Everyone starts connected and live; toggles disconnect and reconnect them.
          for (const i of people.keys()) yield* toggle(i)
          for (const op of ops) {
            if (op._tag === "toggle") {
              yield* toggle(op.client % people.length)
              continue
            }
            const pick = <A>(items: ReadonlyArray<A>, n: number) => items[n % items.length]
            yield* onServer(
              server,
              Effect.gen(function* () {
                switch (op.kind) {
                  case 0:
                    projects.push(idOf(yield* run(as(pick(subjects, op.a)!), "Project", "create", { name: `P${projects.length}` })))
                    return
                  case 1:
                    tasks.push(idOf(yield* run(eAdmin, "Task", "create", { projectId: pick(projects, op.a)!, title: "t" })))
                    return
                  case 2:
                    if (tasks.length > 0) yield* Effect.ignore(attempt(eAdmin, "Task", "complete", {}, pick(tasks, op.a)!))
                    return
                  case 3:
                    if (tasks.length > 0) yield* run(eAdmin, "Task", "move", { projectId: pick(projects, op.b)! }, pick(tasks, op.a)!)
                    return
                  case 4: {
                    const added = yield* Effect.either(
                      attempt(eAdmin, "Member", "add", { projectId: pick(projects, op.a)!, subject: pick(subjects, op.b)!, role: "viewer", email: "m@example.com" })
                    )
                    if (added._tag === "Right") members.push(idOf(added.right))
                    return
                  }
                  default:
                    if (members.length > 0) {
                      const [m] = members.splice(op.a % members.length, 1)
                      yield* run(eAdmin, "Member", "remove", {}, m!)
                    }
                }
              })
            )
          }
          for (const s of sessions) if (s) yield* Scope.close(s, Exit.void)
          for (const [i, p] of people.entries()) {
            const local = yield* Effect.scoped(
              Effect.gen(function* () {
                const c = yield* client(server, files[i]!, p.subject, { roles: p.roles, org, scope: p.scope })
                yield* c.syncOnce
                return yield* c.store.dump
              })
            )
            const expected = yield* oracle(server, p.subject, { roles: p.roles, org, scope: p.scope })
            if (JSON.stringify([...local].sort()) !== JSON.stringify([...expected].sort())) return false
          }
          return true
        }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))

      const result = yield* Effect.promise(() =>
        fc.check(
          fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 25 }), (ops) => Effect.runPromise(property(ops))),
          { seed, numRuns: Number(process.env["FC_RUNS"] ?? 15) }
        )
      )
      if (result.failed) console.error(`HTTP convergence property failed; reproduce with FC_SEED=${seed}\n${fc.defaultReportMessage(result)}`, result.errorInstance)
      assert.isFalse(result.failed, `seed ${seed}`)
    }))
})

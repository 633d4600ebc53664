// Property: whatever the interleaving of writes (membership grants and revocations, role
// changes, task moves, comments) and of clients catching up, every client that catches up
// holds exactly what a fresh authorized read shows its principal. The seed is printed on
// failure; rerun with FC_SEED=<seed>.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import * as fc from "fast-check"
import type { SyncScope } from "@cairn/domain/Sync"
import { catchUp, engineLayer, memoryClient } from "./support/harness.js"
import { attempt, database, idOf, run, tempDir, visibleTo, who } from "./support/tracker.js"

const subjects = ["alice", "bob", "carol", "dave"] as const
const roles = ["owner", "editor", "viewer"] as const

type Op =
  | { readonly _tag: "project"; readonly by: number }
  | { readonly _tag: "task"; readonly project: number; readonly title: string }
  | { readonly _tag: "rename"; readonly task: number; readonly title: string }
  | { readonly _tag: "complete"; readonly task: number }
  | { readonly _tag: "move"; readonly task: number; readonly project: number }
  | { readonly _tag: "comment"; readonly task: number }
  | { readonly _tag: "grant"; readonly subject: number; readonly project: number; readonly role: number }
  | { readonly _tag: "revoke"; readonly member: number }
  | { readonly _tag: "role"; readonly member: number; readonly role: number }
  | { readonly _tag: "sync"; readonly client: number; readonly batches: number | undefined }

const n = fc.nat({ max: 50 })
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ _tag: fc.constant("project" as const), by: n }),
  fc.record({ _tag: fc.constant("task" as const), project: n, title: fc.constantFrom("a", "b", "c") }),
  fc.record({ _tag: fc.constant("rename" as const), task: n, title: fc.constantFrom("x", "y", "z") }),
  fc.record({ _tag: fc.constant("complete" as const), task: n }),
  fc.record({ _tag: fc.constant("move" as const), task: n, project: n }),
  fc.record({ _tag: fc.constant("comment" as const), task: n }),
  fc.record({ _tag: fc.constant("grant" as const), subject: n, project: n, role: n }),
  fc.record({ _tag: fc.constant("revoke" as const), member: n }),
  fc.record({ _tag: fc.constant("role" as const), member: n, role: n }),
  // A client that leaves after its first batches resumes later from that (intermediate) checkpoint.
  fc.record({ _tag: fc.constant("sync" as const), client: n, batches: fc.constantFrom(undefined, undefined, 1, 2) })
)

const openTasks: SyncScope = {
  entities: [
    { from: { kind: "entity", name: "Project" } },
    { from: { kind: "entity", name: "Task" }, where: { op: "eq", path: ["status"], value: "open" } },
    { from: { kind: "entity", name: "Comment" } }
  ]
}

const only = (name: string): SyncScope => ({ entities: [{ from: { kind: "entity", name } }] })

const scenario = (ops: ReadonlyArray<Op>) =>
  Effect.gen(function* () {
    const db = yield* database()
    const clients = [
      memoryClient(who("carol")),
      memoryClient(who("dave"), openTasks),
      memoryClient(who("erin", { roles: ["admin"] })),
      memoryClient(who("bob")),
      // Narrow scopes: records whose parents are not synced, so no untouched parent reveals an access change.
      memoryClient(who("carol"), only("Task")),
      memoryClient(who("dave"), only("Comment"))
    ]
    const projects: Array<string> = [idOf(yield* run(who("alice"), "Project", "create", { name: "P0" }))]
    const tasks: Array<string> = []
    const members = () =>
      Effect.map(Effect.orDie(db.reader.unsafe<{ id: string }>(`SELECT id FROM "Member" ORDER BY id`)), (rows) => rows.map((r) => r.id))
    const pick = <A>(items: ReadonlyArray<A>, i: number) => (items.length === 0 ? undefined : items[i % items.length])
    const admin = who("erin", { roles: ["admin"] })
    for (const op of ops) {
      switch (op._tag) {
        case "project":
          projects.push(idOf(yield* run(who(subjects[op.by % subjects.length]!), "Project", "create", { name: `P${projects.length}` })))
          break
        case "task":
          tasks.push(idOf(yield* run(admin, "Task", "create", { projectId: pick(projects, op.project)!, title: op.title })))
          break
        case "rename": {
          const t = pick(tasks, op.task)
          if (t) yield* run(admin, "Task", "rename", { title: op.title }, t)
          break
        }
        case "complete": {
          const t = pick(tasks, op.task)
          if (t) yield* Effect.ignore(attempt(admin, "Task", "complete", {}, t))
          break
        }
        case "move": {
          const t = pick(tasks, op.task)
          if (t) yield* run(admin, "Task", "move", { projectId: pick(projects, op.project)! }, t)
          break
        }
        case "comment": {
          const t = pick(tasks, op.task)
          if (t) yield* run(admin, "Comment", "add", { taskId: t, body: "note" })
          break
        }
        case "grant":
          yield* Effect.ignore(
            attempt(admin, "Member", "add", {
              projectId: pick(projects, op.project)!,
              subject: subjects[op.subject % subjects.length]!,
              role: roles[op.role % roles.length]!,
              email: "m@example.com"
            })
          )
          break
        case "revoke": {
          const m = pick(yield* members(), op.member)
          if (m) yield* run(admin, "Member", "remove", {}, m)
          break
        }
        case "role": {
          const m = pick(yield* members(), op.member)
          if (m) yield* run(admin, "Member", "setRole", { role: roles[op.role % roles.length]! }, m)
          break
        }
        case "sync":
          yield* catchUp(db, clients[op.client % clients.length]!, op.batches)
          break
      }
    }
    for (const client of clients) {
      yield* catchUp(db, client)
      const expected = yield* visibleTo(db, client.principal, client.scope)
      if (JSON.stringify([...client.records].sort()) !== JSON.stringify([...expected].sort())) {
        if (process.env["SYNC_DEBUG"]) console.error("DIVERGED", client.principal.subject, client.resnapshots, JSON.stringify([...client.records].sort()), JSON.stringify([...expected].sort()))
        return { diverged: client.principal.subject, resnapshots: client.resnapshots }
      }
    }
    return undefined
  })

describe("convergence (engine)", () => {
  it.effect("clients that catch up at random points hold exactly what they may see", () =>
    Effect.gen(function* () {
      const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)
      const result = yield* Effect.promise(() =>
        fc.check(
          // Small batch bounds split catch-ups (of the scopes whose policy reads only their own rows) into many batches.
          fc.asyncProperty(fc.array(opArb, { minLength: 5, maxLength: 40 }), fc.constantFrom(300, 1200, 1024 * 1024), (ops, maxBatchBytes) =>
            Effect.runPromise(
              Effect.scoped(
                Effect.gen(function* () {
                  const dir = yield* tempDir
                  const outcome = yield* Effect.scoped(scenario(ops)).pipe(
                    Effect.provide(engineLayer(dir, { pageRows: 3, maxBatchBytes })),
                    Logger.withMinimumLogLevel(LogLevel.Warning)
                  )
                  return outcome === undefined
                })
              )
            )
          ),
          { seed, numRuns: Number(process.env["FC_RUNS"] ?? 40) }
        )
      )
      if (result.failed) console.error(`convergence property failed; reproduce with FC_SEED=${seed}\n${fc.defaultReportMessage(result)}`, result.errorInstance)
      assert.isFalse(result.failed, `seed ${seed}`)
    }))
})

// Fan-out through the real server: many live changes streams of different subjects (and
// two of the same one) on one database. One commit reaches exactly the streams whose
// principal may see it, as exactly its visible change; a commit nobody streaming may see
// reaches none of them (their batches stay empty); the database's hub serves them all.
import { assert, describe, it } from "@effect/vitest"
import { SyncClient } from "@cairn/client/SyncClient"
import { snapshotCursor } from "@cairn/testkit/snapshotCursor"
import { tracker } from "@cairn/client/generated/tracker"
import type { SyncMessage, SyncScope } from "@cairn/domain/Sync"
import { Position } from "@cairn/store"
import { Effect, Schedule, Stream } from "effect"
import { startApp } from "./support/app.js"

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }

describe("sync fan-out through the real server", () => {
  it.scopedLive("one commit reaches exactly the live streams that may see it, a hidden one reaches none", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const alice = app.as(yield* app.token({ sub: "alice", org: "acme" }))
      const root = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const apollo = (yield* alice(tracker.Project.create({ input: { name: "Apollo" } }))).output.id
      const gemini = (yield* alice(tracker.Project.create({ input: { name: "Gemini" } }))).output.id
      const secret = (yield* alice(tracker.Project.create({ input: { name: "Secret" } }))).output.id
      const launch = (yield* alice(tracker.Task.create({ input: { projectId: apollo, title: "Launch" } }))).output.id
      const dock = (yield* alice(tracker.Task.create({ input: { projectId: gemini, title: "Dock" } }))).output.id
      const hidden = (yield* alice(tracker.Task.create({ input: { projectId: secret, title: "Hidden" } }))).output.id
      // More of one project than the hub reads narrowed before it reads the project's members once for all.
      const apolloCrew = Array.from({ length: 12 }, (_, i) => `a${i}`)
      const geminiCrew = ["g0", "g1", "g2"]
      for (const subject of apolloCrew) {
        yield* root(tracker.Member.add({ input: { projectId: apollo, subject, role: "viewer", email: `${subject}@acme.test` } }))
      }
      for (const subject of geminiCrew) {
        yield* root(tracker.Member.add({ input: { projectId: gemini, subject, role: "viewer", email: `${subject}@acme.test` } }))
      }
      // a0 listens twice (two streams of one kind); n0 and n1 are members of nothing.
      const listeners = ["a0", ...apolloCrew, ...geminiCrew, "n0", "n1"]
      const received = listeners.map(() => [] as Array<SyncMessage>)
      for (const [i, subject] of listeners.entries()) {
        const token = yield* app.token({ sub: subject, org: "acme" })
        const rpc = yield* SyncClient.http({ url: `${app.base}/db/sync`, token: Effect.succeed(token) })
        const cursor = yield* snapshotCursor(rpc, tasks)
        yield* rpc.SyncChanges({ scope: tasks, cursor }).pipe(
          Stream.runForEach((message) => Effect.sync(() => received[i]!.push(message))),
          Effect.forkScoped
        )
      }
      const position = (message: SyncMessage) => (message._tag === "SyncBatch" ? Position.decode(message.checkpoint.position) ?? 0 : 0)
      const reached = (at: number) => Effect.suspend(() => (received.every((messages) => messages.some((m) => position(m) >= at)) ? Effect.void : Effect.fail("waiting")))
      const waitAll = (at: number) => Effect.retry(reached(at), { schedule: Schedule.spaced("20 millis"), times: 1500 })
      // Every stream is live and caught up.
      yield* waitAll(1)
      const start = Math.max(...received.map((messages) => Math.max(...messages.map(position))))
      const changesAfter = (i: number, from: number) =>
        received[i]!.filter((m) => position(m) > from).flatMap((m) => (m._tag === "SyncBatch" ? m.changes : []))

      // A change only the Apollo crew may see.
      yield* alice(tracker.Task.rename({ target: launch, input: { title: "Liftoff" } }))
      const first = yield* Effect.retry(
        Effect.suspend(() => {
          const seen = received[0]!.find((m) => m._tag === "SyncBatch" && m.changes.length > 0)
          return seen ? Effect.succeed(position(seen)) : Effect.fail("waiting")
        }),
        { schedule: Schedule.spaced("20 millis"), times: 1500 }
      )
      yield* waitAll(first)
      for (const [i, subject] of listeners.entries()) {
        const changes = changesAfter(i, start)
        if (subject.startsWith("a")) {
          assert.deepStrictEqual(changes.map((c) => [c._tag, c.id, c._tag === "Upsert" ? c.record["title"] : undefined]), [["Upsert", launch, "Liftoff"]], subject)
        } else assert.deepStrictEqual(changes, [], subject)
      }

      // A change none of them may see, then one only the Gemini crew may see.
      yield* alice(tracker.Task.rename({ target: hidden, input: { title: "Still hidden" } }))
      const afterHidden = first + 1
      yield* waitAll(afterHidden)
      for (const i of listeners.keys()) assert.deepStrictEqual(changesAfter(i, first), [], listeners[i])
      yield* alice(tracker.Task.rename({ target: dock, input: { title: "Docked" } }))
      yield* waitAll(afterHidden + 1)
      for (const [i, subject] of listeners.entries()) {
        const changes = changesAfter(i, first)
        if (subject.startsWith("g")) {
          assert.deepStrictEqual(changes.map((c) => [c._tag, c.id, c._tag === "Upsert" ? c.record["title"] : undefined]), [["Upsert", dock, "Docked"]], subject)
        } else assert.deepStrictEqual(changes, [], subject)
        // Only batches: nobody was sent back to a snapshot.
        assert.isTrue(received[i]!.every((m) => m._tag === "SyncBatch"), subject)
      }
    }), 60_000)
})

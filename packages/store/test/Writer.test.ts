import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, FiberRef, Logger, Metric, Option, TestClock } from "effect"
import { v7 as uuidv7 } from "uuid"
import { InternalError } from "@cairn/domain/InternalError"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { type Receipt } from "@cairn/domain/Receipt"
import { Position, Writer } from "@cairn/store"
import { type Database, Databases } from "@cairn/store/Databases"
import { type MutationGuardShape } from "@cairn/store/MutationGuard"
import { fullView, mutate, principal, request, storeLayer, type Switches, tempDir } from "./support/notes.js"

const send = (req: MutateRequest, subject = "alice") =>
  Effect.flatMap(fullView, (view) => mutate({ view, principal: principal(subject), request: req }))

const idOf = (receipt: Receipt) => (receipt.output as { readonly id: string }).id

/** Runs `f` with the caller's database held open (so tests can watch its queue). */
const withDatabase = <A, E, R>(f: (db: Database) => Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.flatMap(Databases, (d) => Effect.flatMap(d.activate(principal().databaseKey), f)))

const rows = (text: string, params: ReadonlyArray<unknown> = []) =>
  withDatabase((db) => Effect.orDie(db.reader.unsafe<Record<string, any>>(text, params)))

/** Waits until `n` invocations are queued behind the one holding the writer. */
const queuedAtLeast = (n: number) =>
  withDatabase((db) =>
    Effect.gen(function* () {
      while ((yield* db.queued) < n) yield* Effect.yieldNow()
    })
  )

/** Collects log lines (message and annotations) written while `effect` runs. */
const captureLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ message, annotations, cause }) => {
      lines.push(JSON.stringify({ message, annotations: Object.fromEntries(annotations), cause: Cause.pretty(cause) }))
    })
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return [result, lines] as const
  })

describe("Writer", () => {
  it.scoped("64 concurrent duplicates of one invocation commit exactly once", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      yield* Effect.gen(function* () {
        const req = request("Note", "create", { title: "Once" })
        const answers = yield* Effect.all(Array.from({ length: 64 }, () => send(req)), { concurrency: "unbounded" })
        for (const answer of answers) assert.deepStrictEqual(answer, answers[0])
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 1)
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_commits`))[0]!.n, 1)
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 1)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))

  it.scoped("one group commits many invocations; a rejection or a defect never undoes a neighbour", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: false }
      yield* Effect.gen(function* () {
        const done = idOf(yield* send(request("Note", "create", { title: "Done" })))
        yield* send(request("Note", "finish", {}, { target: done }))
        // Hold the writer inside one invocation while the next ones queue up behind it.
        switches.latch = yield* Deferred.make<void>()
        switches.entered = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(send(request("Note", "probe", { title: "Holder" })))
        yield* Deferred.await(switches.entered)
        const requests = [
          request("Note", "create", { title: "A" }),
          request("Note", "finish", {}, { target: done }),
          request("Note", "create", { title: "B" }),
          request("Note", "probe", { title: "Exploding" }),
          request("Note", "create", { title: "C" })
        ]
        const fibers: Array<Fiber.RuntimeFiber<Receipt, unknown>> = []
        for (const req of requests) {
          fibers.push(yield* Effect.fork(send(req)))
          yield* queuedAtLeast(fibers.length)
        }
        // The queued group commits one second after the holder's group started.
        yield* TestClock.adjust("1 second")
        switches.explode = true
        const before = yield* Metric.value(Writer.groupSize)
        yield* Deferred.succeed(switches.latch, undefined)
        const holderExit = yield* Fiber.await(holder)
        // The holder runs the probe too, with explode already set: a defect, alone in its group.
        assert.isTrue(Exit.isFailure(holderExit))
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        const after = yield* Metric.value(Writer.groupSize)
        // The holder's group was counted when it started; the five queued invocations formed one more.
        assert.strictEqual(after.count - before.count, 1)
        assert.strictEqual(after.sum - before.sum, 5)
        const [a, rejected, b, exploded, c] = exits
        assert.isTrue(Exit.isSuccess(a) && Exit.isSuccess(b) && Exit.isSuccess(c))
        const receipts = [a, b, c].map((e) => (e as Exit.Success<Receipt, unknown>).value)
        assert.deepStrictEqual(receipts.map((r) => r.position), [Position.encode(3), Position.encode(4), Position.encode(5)])
        assert.isTrue(Exit.isFailure(rejected))
        const rejection = Exit.isFailure(rejected) ? Option.getOrUndefined(Cause.failureOption(rejected.cause)) : undefined
        assert.strictEqual((rejection as { _tag: string })._tag, "OperationRejected")
        assert.isTrue(Exit.isFailure(exploded) && Option.isSome(Cause.dieOption(exploded.cause)))

        // One group: every invocation decided in it carries the group's commit time.
        const times = yield* rows(`SELECT json_extract(receipt, '$.committedAt') AS at FROM _cairn_receipts ORDER BY position, outcome`)
        assert.deepStrictEqual(
          times.map((t) => t.at),
          [
            "1970-01-01T00:00:00.000Z",
            "1970-01-01T00:00:00.000Z",
            "1970-01-01T00:00:01.000Z",
            "1970-01-01T00:00:01.000Z",
            "1970-01-01T00:00:01.000Z",
            "1970-01-01T00:00:01.000Z"
          ]
        )
        const titles = (yield* rows(`SELECT title FROM "Note" ORDER BY title`)).map((r) => r.title)
        assert.deepStrictEqual(titles, ["A", "B", "C", "Done"])
        assert.deepStrictEqual((yield* rows(`SELECT position FROM _cairn_commits ORDER BY position`)).map((r) => r.position), [1, 2, 3, 4, 5])
      }).pipe(Effect.provide(storeLayer({ dataDir, switches })))
    }))

  it.scoped("a handler defect rolls back, stores no receipt, answers with a correlation id only; a fixed retry succeeds", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: true }
      yield* Effect.gen(function* () {
        const req = request("Note", "probe", { title: "Fragile" })
        const [exit, lines] = yield* captureLogs(Effect.exit(send(req).pipe(Effect.annotateLogs("requestId", "req-annotated-7"))))
        assert.isTrue(Exit.isFailure(exit))
        const defect = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined
        assert.instanceOf(defect, InternalError)
        const error = defect as InternalError
        assert.notInclude(error.message, "exploded")
        assert.notInclude(error.message, "DEADBEEF")
        assert.include(error.message, error.correlationId)
        // The operator finds the correlation id, the cause and the opaque database id in the log; never the key.
        const line = lines.find((l) => l.includes(error.correlationId))
        assert.isDefined(line)
        assert.include(line!, "DEADBEEF")
        // Logged by the writer's drain fiber, under the submitting request's annotations.
        assert.include(line!, "req-annotated-7")
        assert.notInclude(lines.join("\n"), "org-acme")
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 0)
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 0)

        switches.explode = false
        const receipt = yield* send(req)
        assert.strictEqual(receipt.outcome, "committed")
        assert.strictEqual(receipt.position, Position.encode(1))
        assert.deepStrictEqual(yield* send(req), receipt)
      }).pipe(Effect.provide(storeLayer({ dataDir, switches })))
    }))

  it.scoped("an operation that yields to the event loop inside the transaction dies, writes nothing, even later; its group commits", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: false }
      yield* Effect.gen(function* () {
        // Hold the writer so that the async probe shares a group with its neighbours.
        const latch = yield* Deferred.make<void>()
        switches.latch = latch
        switches.entered = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(send(request("Note", "create", { title: "Holder" })))
        yield* Deferred.await(switches.entered)
        switches.awaitPromise = true
        const fibers: Array<Fiber.RuntimeFiber<Receipt, unknown>> = []
        for (const req of [request("Note", "create", { title: "Before" }), request("Note", "probe", { title: "Async" }), request("Note", "create", { title: "After" })]) {
          fibers.push(yield* Effect.fork(send(req)))
          yield* queuedAtLeast(fibers.length)
        }
        switches.latch = undefined
        const before = yield* Metric.value(Writer.groupSize)
        yield* Deferred.succeed(latch, undefined)
        yield* Fiber.join(holder)
        const [first, probe, last] = yield* Effect.forEach(fibers, Fiber.await)
        const after = yield* Metric.value(Writer.groupSize)
        assert.strictEqual(after.sum - before.sum, 3, "the three queued invocations formed one group")
        assert.isTrue(Exit.isSuccess(first) && Exit.isSuccess(last))
        const defect = Exit.isFailure(probe!) ? Option.getOrUndefined(Cause.dieOption(probe.cause)) : undefined
        assert.instanceOf(defect, InternalError)
        // Let the interrupted handler's continuation (if any) run: it must not write.
        for (let i = 0; i < 20; i++) yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        assert.deepStrictEqual((yield* rows(`SELECT title FROM "Note" ORDER BY title`)).map((r) => r.title), ["After", "Before", "Holder"])
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 3)
        // The connection is usable afterwards: no transaction was left open.
        switches.awaitPromise = false
        const next = yield* send(request("Note", "probe", { title: "Sync" }))
        assert.strictEqual(next.position, Position.encode(4))
      }).pipe(Effect.provide(storeLayer({ dataDir, switches })))
    }))

  it.scoped("the invocations of one group run one after another in one fiber, each from the same fiber refs: what one sets never reaches the next", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: false }
      const counter = FiberRef.unsafeMake(0)
      const seen: Array<number> = []
      // The guard runs in the invocation's fiber, inside the group's transaction: it counts in a fiber ref, unscoped.
      const guard: MutationGuardShape = {
        check: () =>
          Effect.flatMap(FiberRef.get(counter), (n) => {
            seen.push(n)
            return FiberRef.set(counter, n + 1)
          })
      }
      yield* Effect.gen(function* () {
        const latch = yield* Deferred.make<void>()
        switches.latch = latch
        switches.entered = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(send(request("Note", "create", { title: "Holder" })))
        yield* Deferred.await(switches.entered)
        const fibers: Array<Fiber.RuntimeFiber<Receipt, unknown>> = []
        for (const title of ["One", "Two", "Three"]) {
          fibers.push(yield* Effect.fork(send(request("Note", "create", { title }))))
          yield* queuedAtLeast(fibers.length)
        }
        const before = yield* Metric.value(Writer.groupSize)
        switches.latch = undefined
        yield* Deferred.succeed(latch, undefined)
        yield* Fiber.join(holder)
        yield* Effect.forEach(fibers, Fiber.join)
        const after = yield* Metric.value(Writer.groupSize)
        assert.strictEqual(after.sum - before.sum, 3, "the three queued invocations formed one group")
        assert.deepStrictEqual(seen, [0, 0, 0, 0])
      }).pipe(Effect.provide(storeLayer({ dataDir, switches, guard })))
    }))

  it.scoped("a full queue fails fast with Overloaded and applies nothing; the same request succeeds later", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: false }
      yield* Effect.gen(function* () {
        switches.latch = yield* Deferred.make<void>()
        switches.entered = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(send(request("Note", "probe", { title: "Holder" })))
        yield* Deferred.await(switches.entered)
        const queued = [request("Note", "create", { title: "Q1" }), request("Note", "create", { title: "Q2" })]
        const fibers: Array<Fiber.RuntimeFiber<Receipt, unknown>> = []
        for (const req of queued) {
          fibers.push(yield* Effect.fork(send(req)))
          yield* queuedAtLeast(fibers.length)
        }
        const refusedRequest = request("Note", "create", { title: "Refused" })
        const refused = yield* send(refusedRequest).pipe(Effect.flip)
        assert.strictEqual(refused._tag, "Overloaded")
        assert.isTrue(refused._tag === "Overloaded" && refused.retryAfterSeconds > 0)

        yield* Deferred.succeed(switches.latch, undefined)
        yield* Fiber.join(holder)
        yield* Effect.forEach(fibers, Fiber.join)
        assert.deepStrictEqual((yield* rows(`SELECT title FROM "Note" ORDER BY title`)).map((r) => r.title), ["Holder", "Q1", "Q2"])
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts WHERE invocation_id = ?`, [refusedRequest.invocationId]))[0]!.n, 0)
        const later = yield* send(refusedRequest)
        assert.strictEqual(later.outcome, "committed")
        assert.strictEqual(later.position, Position.encode(4))
      }).pipe(Effect.provide(storeLayer({ dataDir, switches, writerQueueLimit: 2 })))
    }))

  it.scoped("compaction waits while a group commit holds the write connection, then runs in its own transaction", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const switches: Switches = { latch: undefined, explode: false }
      yield* Effect.gen(function* () {
        for (const title of ["One", "Two", "Three"]) yield* send(request("Note", "create", { title }))
        switches.latch = yield* Deferred.make<void>()
        switches.entered = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(send(request("Note", "probe", { title: "Holder" })))
        // The probe now runs inside the group's transaction.
        yield* Deferred.await(switches.entered)
        const compaction = yield* Effect.fork(withDatabase((db) => db.compact))
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
        assert.isTrue(Option.isNone(yield* Fiber.poll(compaction)))
        yield* Deferred.succeed(switches.latch, undefined)
        const receipt = yield* Fiber.join(holder)
        assert.strictEqual(receipt.position, Position.encode(4))
        // Retaining one commit of the three committed when it started.
        assert.strictEqual(yield* Fiber.join(compaction), 2)
        const payloads = yield* rows(`SELECT changes FROM _cairn_commits ORDER BY position`)
        assert.deepStrictEqual(payloads.map((r) => r.changes === "[]"), [true, true, false, false])
      }).pipe(Effect.provide(storeLayer({ dataDir, switches, retainedCommits: 1 })))
    }))

  it.scoped("receipts survive a restart: replays are identical, the log continues without a gap", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const created = request("Note", "create", { title: "Persistent" })
      const first = yield* Effect.gen(function* () {
        const committed = yield* send(created)
        const id = idOf(committed)
        yield* send(request("Note", "finish", {}, { target: id }))
        const rejectedRequest = request("Note", "finish", {}, { target: id })
        const rejected = yield* send(rejectedRequest).pipe(Effect.flip)
        return { committed, id, rejectedRequest, rejected }
      }).pipe(Effect.provide(storeLayer({ dataDir })))

      yield* Effect.gen(function* () {
        assert.deepStrictEqual(yield* send(created), first.committed)
        const replay = yield* send(first.rejectedRequest).pipe(Effect.flip)
        assert.strictEqual(replay._tag, "OperationRejected")
        assert.deepStrictEqual(
          replay._tag === "OperationRejected" && replay.receipt,
          first.rejected._tag === "OperationRejected" && first.rejected.receipt
        )
        const conflict = yield* send({ ...created, input: { title: "Changed" } }).pipe(Effect.flip)
        assert.strictEqual(conflict._tag, "InvocationConflict")
        const next = yield* send(request("Note", "bump", { by: 2 }, { target: first.id }))
        assert.strictEqual(next.position, Position.encode(3))
        assert.strictEqual(yield* withDatabase((db) => db.position), 3)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))
})

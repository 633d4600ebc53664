/**
 * The single writer of one database: one bounded queue, one fiber draining it in
 * groups into one synchronous transaction on the raw write connection (group commit),
 * each invocation in its own savepoint, its receipt and commit row in the same
 * transaction as its effects.
 */
import type { SqlClient } from "@effect/sql"
import {
  Cause,
  Clock,
  Context,
  Effect,
  Either,
  Exit,
  FiberId,
  FiberRef,
  HashMap,
  Metric,
  MetricBoundaries,
  Option,
  Runtime,
  Schema,
  Tracer,
  type Scope,
  type Subscribable,
  SubscriptionRef
} from "effect"
import { Inaccessible, type InvocationConflict, OperationRejected } from "@cairn/domain/PublicError"
import { InternalError } from "@cairn/domain/InternalError"
import { type InvocationId } from "@cairn/domain/Ids"
import { Overloaded } from "@cairn/domain/Overloaded"
import { Unavailable } from "@cairn/domain/Refusal"
import { type Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import { type Target } from "@cairn/domain/References"
import type { CompiledOperation } from "@cairn/catalog/Catalog"
import type { CommitRecord, Group, ReceiptRecord } from "./Archive.js"
import { Rejection } from "./Handler.js"
import type { Raw } from "./internal/connection.js"
import { ChangeSet, makeTx, statementsFor, TransactionEnded, type TxImpl } from "./internal/tx.js"
import * as Receipts from "./internal/receipts.js"
import { commitsTable, compact as compactLog, internalOwner, invocationPrefix, lastPosition, prune as pruneLog, receiptsTable, retention } from "./Log.js"
import type { MutationGuardShape } from "./MutationGuard.js"
import { operationKey, type OperationCatalogShape } from "./OperationCatalog.js"
import * as Position from "./Position.js"
import { classify, countWriteFault } from "./StorageFault.js"

/** One validated mutation intent, ready for the writer. */
export interface Invocation {
  readonly invocationId: InvocationId
  readonly operation: CompiledOperation
  readonly target: Target | undefined
  /** Decoded with the operation's input schema. */
  readonly input: unknown
  /** Digest of (principal subject, operation, target, canonical input). */
  readonly intent: string
  readonly principal: Principal
  readonly catalogToken: string
}

export type SubmitError = Inaccessible | OperationRejected | InvocationConflict | Overloaded | Unavailable

export interface Writer {
  /**
   * Decides one invocation and answers once its group is durably committed. Replays
   * return the stored receipt; a full queue fails fast with `Overloaded` (nothing
   * applied); a handler defect dies with `InternalError` (rolled back, nothing stored).
   */
  readonly submit: (invocation: Invocation) => Effect.Effect<Receipt, SubmitError>
  /** The last committed position. */
  readonly position: Effect.Effect<number>
  /** Invocations waiting in the queue (not counting the group being committed). */
  readonly queued: Effect.Effect<number>
  /** The last committed position, published after each group commit (sync's live tail). */
  readonly committed: Subscribable.Subscribable<number>
  /**
   * Drops the change payloads of commits at or below `through` (see `Log.compact`) in a
   * transaction of its own on the write connection, so it takes turns with group commits
   * (the client holds the connection for a transaction); answers how many were dropped.
   */
  readonly compact: (through: number) => Effect.Effect<number>
  /**
   * One turn of history pruning (see `Log.prune`) in a transaction of its own, taking turns with group
   * commits like `compact`: receipts of invocation ids minted before `receiptsBefore` (epoch millis),
   * commit headers without payload committed before `commitsBefore` (an ISO instant). From then on an
   * invocation id minted before `receiptsBefore` whose receipt is gone is refused, never decided again.
   */
  readonly prune: (receiptsBefore: number, commitsBefore: string) => Effect.Effect<{ readonly receipts: number; readonly commits: number }>
}

export interface WriterOptions {
  /** Opaque database id, for logs only. */
  readonly databaseId: string
  /** The one write connection of the file. */
  readonly sql: SqlClient.SqlClient
  /** The same connection, raw: the group's transaction runs on it synchronously. */
  readonly raw: Raw
  readonly operations: OperationCatalogShape
  readonly guard: MutationGuardShape
  readonly queueLimit: number
  readonly maxBatch: number
  /**
   * Runs inside each group's transaction, just before it commits: a failure rolls the whole
   * group back (its callers get a defect, nothing is acknowledged). The store checks here that
   * the file it writes is still the database's file.
   */
  readonly beforeCommit?: Effect.Effect<void, unknown>
  /**
   * Runs after each group's local COMMIT that decided anything, before any of its callers is answered
   * and before the next group starts (the archive's ship: see `Archive.Session.ship`). A failure means
   * nothing of the group is acknowledged: every caller of the group and every queued one gets the
   * retryable `notAcknowledged` refusal, and the writer refuses all later submits (its database must
   * be closed and rebuilt; `onAfterCommitFailure` is told). Absent (embedded): nothing runs.
   */
  readonly afterCommit?: (group: Group) => Effect.Effect<void, unknown>
  /** Told once, from the writer's fiber, when `afterCommit` failed (the store closes the database). */
  readonly onAfterCommitFailure?: Effect.Effect<void>
}

export const mutationsTotal = Metric.counter("cairn_mutations_total", {
  description: "Mutation answers (receipt outcomes) by outcome: committed, rejected, replayed, conflict, expired, inaccessible, defect, overloaded",
  incremental: true
})
/** Invocations waiting in every writer's queue (summed over databases: database ids are never labels). */
export const queueDepth = Metric.gauge("cairn_writer_queue_depth", {
  description: "Invocations waiting in the writers' queues, summed over open databases"
})
export const groupSize = Metric.histogram(
  "cairn_writer_group_size",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 10 }),
  "Invocations per group-commit transaction"
)

export const countOutcome = (outcome: string, n = 1) => Metric.incrementBy(Metric.tagged(mutationsTotal, "outcome", outcome), n)

export const overloaded = () =>
  new Overloaded({ message: "The database is busy; nothing was applied. Retry the same request shortly.", retryAfterSeconds: 1 })

/** The public answer when a group could not be made durable beyond the machine: retry the same request (same invocation id). */
export const notAcknowledged = () =>
  new Overloaded({ message: "The change could not be made durable; nothing was acknowledged. Retry the same request.", retryAfterSeconds: 1 })

/**
 * The public answer when the disk is full (SQLITE_FULL, ENOSPC): the group was rolled back, nothing
 * was stored or acknowledged; the same request succeeds once the operator frees space.
 */
export const storageFull = () =>
  new Unavailable({
    message: "Your database cannot take writes right now (its storage is full); nothing was applied. Retry the same request later.",
    retryAfterSeconds: 30
  })

/** The public answer for a target that is absent or hidden: the same words either way. */
export const targetInaccessible = (entity: string) =>
  new Inaccessible({ message: `No accessible ${entity} has this id. Use an id returned by a query or a create operation.` })

/**
 * Tests only: runs in the writer's fiber while a group holds the write connection, before its
 * transaction begins (so a test can hold the writer while invocations queue up behind it).
 * Harmless by default: nothing.
 */
export class GroupPause extends Context.Reference<GroupPause>()("@cairn/store/Writer/GroupPause", {
  defaultValue: (): Effect.Effect<void> => Effect.void
}) {}

interface Item {
  readonly invocation: Invocation
  readonly resume: (answer: Exit.Exit<Receipt, SubmitError>) => void
  /** The submitting request's log annotations: the drain fiber logs this invocation under them. */
  readonly annotations: HashMap.HashMap<string, unknown>
  /** The submitting request's span, which the group's span links to. */
  readonly span: Tracer.AnySpan | undefined
}

const correlationId = () => crypto.randomUUID()

/** The group's transaction failed as a whole (its pre-commit check). */
class GroupFailed extends Error {
  constructor(readonly failure: Cause.Cause<unknown>) {
    super("group failed")
  }
}

/** A defect found inside the synchronous group, logged once the group is over. */
interface Defect {
  readonly cause: Cause.Cause<unknown>
  readonly message: string
  readonly operation?: CompiledOperation | undefined
  readonly id: string
  /** The submitting request's log annotations, when the defect is one invocation's. */
  readonly annotations?: HashMap.HashMap<string, unknown> | undefined
}

/** Waits for the next turn of the event loop's check phase: I/O that arrived meanwhile has been read. */
const nextTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** How long a group waits at most for more invocations while they keep arriving. */
const lingerMillis = 2

const insertCommitSql = `INSERT INTO ${commitsTable} (position, invocation_id, operation, target_entity, target_id, intent, subject, receipt, changes, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
const insertReceiptSql = `INSERT INTO ${receiptsTable} (invocation_id, intent, outcome, position, receipt) VALUES (?, ?, ?, ?, ?)`

/** The output encoders of the catalog's operations: the same for every database, so built once per operation. */
const encoders = new WeakMap<CompiledOperation, (output: unknown) => Effect.Effect<unknown>>()

/**
 * The output of `op` as its receipt holds it: encoded with the output schema (a mismatch being a
 * defect of the handler), then as read back from its stored JSON, so that a replay reads the same.
 */
const encoderOf = (op: CompiledOperation): ((output: unknown) => Effect.Effect<unknown>) => {
  let encode = encoders.get(op)
  if (encode === undefined) {
    const encodeSync = Schema.encodeUnknownEither(op.output as Schema.Schema<unknown, unknown>)
    const encodeAsync = Schema.encodeUnknown(op.output as Schema.Schema<unknown, unknown>)
    // As read back from its stored JSON; an output JSON cannot hold is the handler's defect.
    const stored = (encoded: unknown): Effect.Effect<unknown> => {
      try {
        return Effect.succeed(encoded === undefined ? undefined : (JSON.parse(JSON.stringify(encoded)) as unknown))
      } catch (error) {
        return Effect.die(error)
      }
    }
    encode = (output) => {
      // Synchronously when the schema is (the usual case); else as before.
      const encoded = encodeSync(output)
      if (Either.isRight(encoded)) return stored(encoded.right)
      return Effect.flatMap(Effect.orDie(encodeAsync(output)), stored)
    }
    encoders.set(op, encode)
  }
  return encode
}

/**
 * Builds the writer of one database; it stops (finishing its current group) with the scope.
 * Invocations wait in a plain array with their callers' callbacks; one fiber drains it in
 * groups, each group one synchronous transaction on the raw write connection: no fiber or
 * Deferred per invocation, and a transaction never spans a yield to the event loop (an
 * operation that waits for something asynchronous dies, and its late calls touch nothing).
 */
export const make = (options: WriterOptions): Effect.Effect<Writer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { sql, raw, operations, guard, databaseId } = options
    const catalog = operations.catalog
    const statements = statementsFor(catalog)
    const pause = yield* GroupPause
    let committed = yield* Effect.orDie(lastPosition(sql))
    /** Invocation ids below it had their receipts pruned (see `Log.prune`): refused unless a receipt is still there. */
    let horizon = (yield* Effect.orDie(retention(sql))).receiptHorizon
    const published = yield* SubscriptionRef.make(committed)
    let closed = false
    /** Set when a group could not be shipped: later submits get `notAcknowledged`, not `overloaded`. */
    let failed = false
    let pending: Array<Item> = []
    let wake: (() => void) | undefined

    /** What the group needs of each operation, built once per operation (not per invocation): its key, its handler, its encoder. */
    interface PerOperation {
      readonly key: string
      readonly handler: ReturnType<OperationCatalogShape["handler"]>
      readonly encode: (output: unknown) => Effect.Effect<unknown>
    }
    const perOperation = new Map<CompiledOperation, PerOperation>()
    const operationOf = (op: CompiledOperation): PerOperation => {
      let found = perOperation.get(op)
      if (found === undefined) {
        found = { key: operationKey(op), handler: operations.handler(op), encode: encoderOf(op) }
        perOperation.set(op, found)
      }
      return found
    }

    /** Guard, handler and output of one invocation, run synchronously inside its savepoint (plain effects: once per write). */
    const attempt = (invocation: Invocation, per: PerOperation, tx: TxImpl, now: string): Effect.Effect<unknown, unknown> => {
      const op = invocation.operation
      const { input, principal } = invocation
      const decide = (stored: Readonly<Record<string, unknown>> | undefined, target: Record<string, unknown> | undefined) =>
        Effect.zipRight(
          guard.check({ principal, operation: op, input, tx, ...(stored ? { target: stored } : {}) }),
          Effect.flatMap(per.handler({ input, target, tx, principal, now }), per.encode)
        )
      if (!op.targeted) return decide(undefined, undefined)
      return Effect.flatMap(tx.getStored(op.owner, invocation.target!.id), (found) =>
        Option.isNone(found)
          ? Effect.fail(targetInaccessible(op.owner))
          : Effect.flatMap(tx.decode(op.owner, found.value), (target) => decide(found.value, target))
      )
    }

    const receiptOf = (
      invocation: Invocation,
      now: string,
      position: number,
      outcome: { readonly output: unknown } | { readonly reason: string }
    ): Receipt => {
      const t = invocation.target
      return {
        invocationId: invocation.invocationId,
        operation: invocation.operation.ref,
        ...(t ? { target: { kind: "entity" as const, entity: t.entity, id: t.id } } : {}),
        ...("reason" in outcome
          ? { outcome: "rejected" as const, reason: outcome.reason }
          : { outcome: "committed" as const, ...(outcome.output !== undefined ? { output: outcome.output } : {}) }),
        position: Position.encode(position),
        committedAt: now,
        catalogToken: invocation.catalogToken
      }
    }

    /**
     * One group, synchronously: one transaction, a savepoint per invocation, its receipt and
     * commit rows inserted as it is decided. Throws (after rolling back) when the transaction
     * fails as a whole. `runtime` runs the group's handlers to their exits without leaving the
     * thread: one fiber for the whole group (not one per invocation), started again after the
     * invocation that yielded when one does.
     */
    const transaction = (items: ReadonlyArray<Item>, now: string, runtime: Runtime.Runtime<never>, defects: Array<Defect>) => {
      const decided = new Map<string, Receipts.StoredReceipt>()
      let position = committed
      // The group's rows as inserted, for `afterCommit` only (embedded mode builds none).
      const shipping = options.afterCommit !== undefined
      const commitRows: Array<CommitRecord> = []
      const receiptRows: Array<ReceiptRecord> = []
      const answers: Array<Exit.Exit<Receipt, SubmitError>> = []
      const tally: Record<string, number> = {}
      const note = (outcome: string) => (tally[outcome] = (tally[outcome] ?? 0) + 1)
      const defect = (cause: Cause.Cause<unknown>, message: string, operation?: CompiledOperation, annotations?: HashMap.HashMap<string, unknown>) => {
        const id = correlationId()
        defects.push({ cause, message, operation, id, annotations })
        return InternalError.withReference(id)
      }
      raw.exec("BEGIN IMMEDIATE")
      try {
        const insertCommit = raw.statement(insertCommitSql)
        const insertReceipt = raw.statement(insertReceiptSql)
        // Prepared once per connection: `exec` would parse the text again for every invocation.
        const savepoint = raw.statement("SAVEPOINT invocation")
        const release = raw.statement("RELEASE invocation")
        const rollbackTo = raw.statement("ROLLBACK TO invocation")

        /** The invocation being decided: `items[next]`, its transactional view and its changes while its handler runs. */
        let next = 0
        let current: { readonly tx: TxImpl; readonly changes: ChangeSet } | undefined

        /** Stores the outcome of `items[next]` (its handler's exit, in its savepoint) and moves on to the next. */
        const settle = (exit: Exit.Exit<unknown, unknown>, changes: ChangeSet) => {
          const { annotations, invocation } = items[next]!
          next += 1
          if (Exit.isSuccess(exit)) {
            release.run()
            position += 1
            const receipt = receiptOf(invocation, now, position, { output: exit.value })
            const receiptJson = JSON.stringify(receipt)
            const t = invocation.target
            const changesJson = JSON.stringify(changes.toArray())
            insertCommit.run(
              position,
              invocation.invocationId,
              operationOf(invocation.operation).key,
              t ? t.entity : null,
              t ? t.id : null,
              invocation.intent,
              invocation.principal.subject,
              receiptJson,
              changesJson,
              now
            )
            insertReceipt.run(invocation.invocationId, invocation.intent, "committed", position, receiptJson)
            if (shipping) {
              commitRows.push({
                position,
                invocation_id: invocation.invocationId,
                operation: operationOf(invocation.operation).key,
                target_entity: t ? t.entity : null,
                target_id: t ? t.id : null,
                intent: invocation.intent,
                subject: invocation.principal.subject,
                receipt: receiptJson,
                changes: changesJson,
                committed_at: now
              })
              receiptRows.push({ invocation_id: invocation.invocationId, intent: invocation.intent, outcome: "committed", position, receipt: receiptJson })
            }
            decided.set(invocation.invocationId, { intent: invocation.intent, receipt })
            answers.push(Exit.succeed(receipt))
            note("committed")
            return
          }
          rollbackTo.run()
          release.run()
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure) && (failure.value instanceof Rejection || failure.value instanceof OperationRejected)) {
            const reason = failure.value instanceof Rejection ? failure.value.reason : failure.value.message
            const receipt = receiptOf(invocation, now, position, { reason })
            const receiptJson = JSON.stringify(receipt)
            insertReceipt.run(invocation.invocationId, invocation.intent, "rejected", position, receiptJson)
            if (shipping) receiptRows.push({ invocation_id: invocation.invocationId, intent: invocation.intent, outcome: "rejected", position, receipt: receiptJson })
            decided.set(invocation.invocationId, { intent: invocation.intent, receipt })
            answers.push(Exit.fail(new OperationRejected({ message: reason, receipt })))
            note("rejected")
          } else if (Option.isSome(failure) && failure.value instanceof Inaccessible) {
            answers.push(Exit.fail(failure.value))
            note("inaccessible")
          } else {
            const error = defect(exit.cause, "Operation handler failed; the invocation was rolled back and no receipt stored", invocation.operation, annotations)
            answers.push(Exit.die(error))
            note("defect")
          }
        }

        /**
         * Decides `items[next]` and on, in the fiber at hand: replays from their receipts, every other
         * invocation by its handler in its own savepoint. Each invocation starts from the fiber refs
         * the first one saw (what one handler sets never reaches its neighbours), and the handler's
         * continuation touches nothing once the group gave up on it (see below).
         */
        const decideRest = Effect.withFiberRuntime<void>((fiber) => {
          // Puts back the refs the fiber has now, in one assignment: each handler starts from the same
          // refs (as with a fiber of its own), whatever the one before it set, including refs it set first
          // (`Effect.setFiberRefs` would set each captured ref in turn and leave those).
          const refs = fiber.getFiberRefs()
          const restoreRefs = Effect.updateFiberRefs(() => refs)
          const loop: Effect.Effect<void> = Effect.suspend(() => {
            while (next < items.length) {
              const { invocation } = items[next]!
              const prior = decided.get(invocation.invocationId) ?? Receipts.loadSync(raw, invocation.invocationId)
              if (prior) {
                next += 1
                decided.set(invocation.invocationId, prior)
                note(prior.intent === invocation.intent ? "replayed" : "conflict")
                answers.push(Receipts.answerExit(prior, invocation.intent))
                continue
              }
              if (invocation.invocationId < horizon && invocation.operation.owner !== internalOwner) {
                // Its receipt, if it ever had one, was pruned: deciding it again could apply an intent twice.
                next += 1
                note("expired")
                answers.push(Exit.fail(Receipts.expired()))
                continue
              }
              const per = operationOf(invocation.operation)
              const changes = new ChangeSet()
              const tx = makeTx(raw, statements, changes)
              const running = (current = { tx, changes })
              // A failure rolls back to the invocation's savepoint: its neighbours in the group are untouched.
              savepoint.run()
              return Effect.flatMap(Effect.exit(attempt(invocation, per, tx, now)), (exit) => {
                tx.end()
                if (current !== running) return Effect.die(new TransactionEnded())
                current = undefined
                settle(exit, changes)
                return Effect.zipRight(restoreRefs, loop)
              })
            }
            return Effect.void
          })
          return loop
        })

        while (next < items.length) {
          const exit = Runtime.runSyncExit(runtime, decideRest)
          if (Exit.isSuccess(exit)) break
          const died = Cause.dieOption(exit.cause)
          if (current === undefined || Option.isNone(died) || !Runtime.isAsyncFiberException(died.value)) throw new GroupFailed(exit.cause)
          // `items[next]` waited for something asynchronous: stop it (its later calls die on its ended
          // transaction, its continuation stores nothing), roll it back, and go on with the rest.
          died.value.fiber.unsafeInterruptAsFork(FiberId.none)
          const { changes, tx } = current
          current = undefined
          tx.end()
          settle(Exit.die(new TransactionEnded()), changes)
        }
        if (options.beforeCommit) {
          const checked = Runtime.runSyncExit(runtime, options.beforeCommit)
          if (Exit.isFailure(checked)) throw new GroupFailed(checked.cause)
        }
        raw.exec("COMMIT")
      } catch (error) {
        if (raw.inTransaction()) raw.exec("ROLLBACK")
        throw error
      }
      return { answers, position, tally, commits: commitRows, receipts: receiptRows }
    }

    const runGroup = (items: ReadonlyArray<Item>) =>
      Effect.gen(function* () {
        yield* Metric.update(groupSize, items.length)
        yield* Effect.orDie(raw.hold)
        yield* pause
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        // Statements get no spans of their own: the group's span covers them, at a fraction of the cost
        // (the runtime is taken with the tracer off, so no invocation pays for switching it).
        const runtime = yield* Effect.withTracerEnabled(Effect.runtime<never>(), false)
        const defects: Array<Defect> = []
        let result: ReturnType<typeof transaction> | undefined
        let failure: Cause.Cause<unknown> | undefined
        try {
          result = transaction(items, now, runtime, defects)
        } catch (error) {
          failure = error instanceof GroupFailed ? error.failure : Cause.die(error)
        }
        for (const d of defects) yield* logDefect(d)
        if (result !== undefined && options.afterCommit !== undefined && (result.commits.length > 0 || result.receipts.length > 0)) {
          const group: Group = { from: committed, to: result.position, commits: result.commits, receipts: result.receipts }
          const shipped = yield* Effect.exit(options.afterCommit(group))
          if (Exit.isFailure(shipped)) {
            // Committed locally, never acknowledged: this writer takes nothing more, and its file is
            // thrown away by the next activation (which rebuilds from what was shipped).
            closed = true
            failed = true
            const id = correlationId()
            yield* logDefect({ cause: shipped.cause, message: "Group commit could not be shipped; nothing of the group was acknowledged", id })
            const rest = pending
            pending = []
            yield* Metric.incrementBy(queueDepth, -rest.length)
            yield* countOutcome("overloaded", items.length + rest.length)
            const refused = Exit.fail(notAcknowledged())
            for (const item of items) item.resume(refused)
            for (const item of rest) item.resume(refused)
            if (options.onAfterCommitFailure) yield* options.onAfterCommitFailure
            return
          }
        }
        if (result !== undefined) {
          committed = result.position
          for (let i = 0; i < items.length; i++) items[i]!.resume(result.answers[i]!)
          yield* SubscriptionRef.set(published, committed)
          for (const [outcome, n] of Object.entries(result.tally)) yield* countOutcome(outcome, n)
        } else {
          // The transaction failed as a whole (storage fault): nothing of the group was applied.
          yield* countWriteFault(failure!)
          if (classify(failure!) === "full_disk") {
            // The operator's to fix, the caller's to retry: not a defect of the request.
            yield* Effect.logError("Group commit failed: the disk is full; the whole group was rolled back", failure!).pipe(
              Effect.annotateLogs({ database: databaseId })
            )
            yield* countOutcome("unavailable", items.length)
            const refused = Exit.fail(storageFull())
            for (const item of items) item.resume(refused)
            return
          }
          const id = correlationId()
          yield* logDefect({ cause: failure!, message: "Group commit failed; the whole group was rolled back", id })
          yield* countOutcome("defect", items.length)
          const error = Exit.die(InternalError.withReference(id))
          for (const item of items) item.resume(error)
        }
      }).pipe(
        Effect.scoped,
        Effect.withSpan("Writer.group", {
          root: true,
          attributes: { "cairn.group.size": items.length },
          // Every invocation's request span: the group is one hop of each of their traces.
          links: items.flatMap((item): Array<Tracer.SpanLink> => (item.span === undefined ? [] : [{ _tag: "SpanLink", span: item.span, attributes: {} }]))
        })
      )

    const logDefect = (d: Defect) =>
      Effect.logError(d.message, d.cause).pipe(
        Effect.annotateLogs({ correlationId: d.id, database: databaseId, ...(d.operation ? { operation: operationKey(d.operation) } : {}) }),
        d.annotations === undefined ? (effect) => effect : Effect.locally(FiberRef.currentLogAnnotations, d.annotations)
      )

    /** Resumes when there is something to do. */
    const work = Effect.async<void>((resume) => {
      if (pending.length > 0) return resume(Effect.void)
      wake = () => resume(Effect.void)
    })

    /** While invocations keep arriving (and the group is not full), waits a turn of the event loop. */
    const gather = Effect.suspend(() => {
      const until = performance.now() + lingerMillis
      let seen = pending.length
      const loop: Effect.Effect<void> = Effect.suspend(() =>
        seen >= options.maxBatch || performance.now() >= until
          ? Effect.void
          : Effect.flatMap(nextTurn, () => {
              if (pending.length === seen) return Effect.void
              seen = pending.length
              return loop
            })
      )
      return loop
    })

    const take = Effect.suspend(() => {
      const batch = pending.length <= options.maxBatch ? pending : pending.slice(0, options.maxBatch)
      pending = pending.length <= options.maxBatch ? [] : pending.slice(options.maxBatch)
      return Effect.as(Metric.incrementBy(queueDepth, -batch.length), batch)
    })

    yield* work.pipe(
      Effect.zipRight(gather),
      // Taken and committed without an interruption point in between: a taken invocation is always answered.
      Effect.zipRight(Effect.uninterruptible(Effect.flatMap(take, runGroup))),
      Effect.forever,
      // The drain fiber outlives the request that activated the database: it keeps none of its annotations.
      Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty()),
      Effect.annotateLogs({ database: databaseId }),
      Effect.forkScoped
    )

    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        const rest = pending
        pending = []
        const refused = Exit.fail(overloaded())
        for (const item of rest) item.resume(refused)
        return rest.length
      }).pipe(Effect.flatMap((n) => Metric.incrementBy(queueDepth, -n)))
    )

    // No span of its own: it is one hop inside `Mutate.mutate`'s span.
    const submit = (invocation: Invocation): Effect.Effect<Receipt, SubmitError> =>
      Effect.suspend(() => {
        if (closed) return Effect.fail(failed ? notAcknowledged() : overloaded())
        if (pending.length >= options.queueLimit) return Effect.zipRight(countOutcome("overloaded"), Effect.fail(overloaded()))
        return Effect.withFiberRuntime<Receipt, SubmitError>((fiber) => {
          const annotations = fiber.getFiberRef(FiberRef.currentLogAnnotations)
          const span = Option.getOrUndefined(Context.getOption(fiber.currentContext, Tracer.ParentSpan))
          // `Metric.increment(queueDepth)`, from the fiber at hand (no effect of its own).
          queueDepth.unsafeModify(1, fiber.getFiberRef(FiberRef.currentMetricLabels))
          return Effect.async<Receipt, SubmitError>((resume) => {
            pending.push({ invocation, resume, annotations, span })
            if (wake !== undefined) {
              const w = wake
              wake = undefined
              w()
            }
          })
        })
      })

    const compact = (through: number) =>
      Effect.suspend(() => sql.withTransaction(compactLog(sql, Math.min(through, committed)))).pipe(
        Effect.orDie,
        Effect.withSpan("Writer.compact")
      )

    const prune = (receiptsBefore: number, commitsBefore: string) =>
      Effect.suspend(() => sql.withTransaction(pruneLog(sql, invocationPrefix(receiptsBefore), commitsBefore))).pipe(
        Effect.map((pruned) => {
          // Committed: from now on the writer refuses what it can no longer look up.
          if (pruned.horizon > horizon) horizon = pruned.horizon
          return { receipts: pruned.receipts, commits: pruned.commits }
        }),
        Effect.orDie,
        Effect.withSpan("Writer.prune")
      )

    return { submit, position: Effect.sync(() => committed), queued: Effect.sync(() => pending.length), committed: published, compact, prune }
  })

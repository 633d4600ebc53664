/**
 * The single writer of one database: one bounded queue, one fiber draining it in
 * groups into one transaction (group commit), each invocation in its own savepoint,
 * its receipt and commit row in the same transaction as its effects.
 */
import type { SqlClient } from "@effect/sql"
import {
  Cause,
  Chunk,
  Context,
  Clock,
  Deferred,
  Effect,
  Exit,
  FiberId,
  FiberRef,
  HashMap,
  Metric,
  MetricBoundaries,
  Option,
  Queue,
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
import { type Principal } from "@cairn/domain/Principal"
import { type Receipt } from "@cairn/domain/Receipt"
import { type Target } from "@cairn/domain/References"
import type { CompiledOperation } from "@cairn/catalog/Catalog"
import { Rejection } from "./Handler.js"
import { ChangeSet, makeTx, statementsFor } from "./internal/tx.js"
import * as Receipts from "./internal/receipts.js"
import { commitsTable, compact as compactLog, lastPosition, receiptsTable } from "./Log.js"
import type { MutationGuardShape } from "./MutationGuard.js"
import { operationKey, type OperationCatalogShape } from "./OperationCatalog.js"
import { countWriteFault } from "./StorageFault.js"
import * as Position from "./Position.js"

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

export type SubmitError = Inaccessible | OperationRejected | InvocationConflict | Overloaded

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
}

export interface WriterOptions {
  /** Opaque database id, for logs only. */
  readonly databaseId: string
  /** The one write connection of the file. */
  readonly sql: SqlClient.SqlClient
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
}

export const mutationsTotal = Metric.counter("cairn_mutations_total", {
  description: "Mutation answers (receipt outcomes) by outcome: committed, rejected, replayed, conflict, inaccessible, defect, overloaded",
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

/** The public answer for a target that is absent or hidden: the same words either way. */
export const targetInaccessible = (entity: string) =>
  new Inaccessible({ message: `No accessible ${entity} has this id. Use an id returned by a query or a create operation.` })

interface Item {
  readonly invocation: Invocation
  readonly deferred: Deferred.Deferred<Receipt, SubmitError>
  /** The submitting request's log annotations: the drain fiber logs this invocation under them. */
  readonly annotations: HashMap.HashMap<string, unknown>
  /** The submitting request's span, which the group's span links to. */
  readonly span: Tracer.AnySpan | undefined
}

/** A `_cairn_commits` row, as the group's batch insert binds it. */
type CommitRow = {
  readonly position: number
  readonly invocation_id: string
  readonly operation: string
  readonly target_entity: string | null
  readonly target_id: string | null
  readonly intent: string
  readonly subject: string
  readonly receipt: string
  readonly changes: string
  readonly committed_at: string
}
/** A `_cairn_receipts` row, as the group's batch insert binds it. */
type ReceiptRow = {
  readonly invocation_id: string
  readonly intent: string
  readonly outcome: "committed" | "rejected"
  readonly position: number
  readonly receipt: string
}

const correlationId = () => crypto.randomUUID()

/** Builds the writer of one database; it stops (finishing its current group) with the scope. */
export const make = (options: WriterOptions): Effect.Effect<Writer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { sql, operations, guard, databaseId } = options
    const catalog = operations.catalog
    const statements = statementsFor(catalog)
    let committed = yield* Effect.orDie(lastPosition(sql))
    const published = yield* SubscriptionRef.make(committed)
    let closed = false
    const queue = yield* Queue.dropping<Item>(options.queueLimit)

    const defect = (cause: Cause.Cause<unknown>, message: string, operation?: CompiledOperation) =>
      Effect.gen(function* () {
        const id = correlationId()
        yield* Effect.logError(message, cause).pipe(
          Effect.annotateLogs({ correlationId: id, database: databaseId, ...(operation ? { operation: operationKey(operation) } : {}) })
        )
        return InternalError.withReference(id)
      })

    /** Guard, handler and output of one invocation, inside its savepoint. */
    const attempt = (invocation: Invocation, changes: ChangeSet, now: string) =>
      Effect.gen(function* () {
        const op = invocation.operation
        const tx = makeTx(sql, statements, changes)
        let stored: Readonly<Record<string, unknown>> | undefined
        let target: Record<string, unknown> | undefined
        if (op.targeted) {
          const found = yield* tx.getStored(op.owner, invocation.target!.id)
          if (Option.isNone(found)) return yield* targetInaccessible(op.owner)
          stored = found.value
          target = yield* tx.decode(op.owner, stored)
        }
        yield* guard.check({
          principal: invocation.principal,
          operation: op,
          input: invocation.input,
          tx,
          ...(stored ? { target: stored } : {})
        })
        const output = yield* operations.handler(op)({ input: invocation.input, target, tx, principal: invocation.principal, now })
        const encoded = yield* Effect.orDie(Schema.encodeUnknown(op.output)(output))
        // The receipt must read the same when replayed from its stored JSON.
        return yield* Effect.try(() => (encoded === undefined ? undefined : (JSON.parse(JSON.stringify(encoded)) as unknown))).pipe(
          Effect.orDie
        )
      })

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
     * One group: one transaction, a nested one (a savepoint) per invocation, receipts and
     * log rows batched at the end. The client holds the write connection for the whole
     * transaction, so nothing else (compaction) writes in between.
     */
    const transaction = (items: ReadonlyArray<Item>, now: string) =>
      Effect.gen(function* () {
        const decided = new Map(
          yield* Receipts.load(sql, [...new Set(items.map((i) => i.invocation.invocationId))])
        )
        let position = committed
        const answers: Array<Exit.Exit<Receipt, SubmitError>> = []
        const commitRows: Array<CommitRow> = []
        const receiptRows: Array<ReceiptRow> = []
        const tally: Record<string, number> = {}
        const note = (outcome: string) => (tally[outcome] = (tally[outcome] ?? 0) + 1)
        for (const { annotations, invocation } of items) {
          const prior = decided.get(invocation.invocationId)
          if (prior) {
            const replay = yield* Effect.exit(Receipts.answer(prior, invocation.intent))
            note(prior.intent === invocation.intent ? "replayed" : "conflict")
            answers.push(replay)
            continue
          }
          const changes = new ChangeSet()
          // A failure rolls back to the invocation's savepoint: its neighbours in the group are untouched.
          const exit = yield* Effect.exit(sql.withTransaction(attempt(invocation, changes, now)))
          if (Exit.isSuccess(exit)) {
            position += 1
            const receipt = receiptOf(invocation, now, position, { output: exit.value })
            const receiptJson = JSON.stringify(receipt)
            const t = invocation.target
            commitRows.push({
              position,
              invocation_id: invocation.invocationId,
              operation: operationKey(invocation.operation),
              target_entity: t ? t.entity : null,
              target_id: t ? t.id : null,
              intent: invocation.intent,
              subject: invocation.principal.subject,
              receipt: receiptJson,
              changes: JSON.stringify(changes.toArray()),
              committed_at: now
            })
            receiptRows.push({
              invocation_id: invocation.invocationId,
              intent: invocation.intent,
              outcome: "committed",
              position,
              receipt: receiptJson
            })
            decided.set(invocation.invocationId, { intent: invocation.intent, receipt })
            answers.push(Exit.succeed(receipt))
            note("committed")
            continue
          }
          const failure = Cause.failureOption(exit.cause)
          if (Option.isSome(failure) && (failure.value instanceof Rejection || failure.value instanceof OperationRejected)) {
            const reason = failure.value instanceof Rejection ? failure.value.reason : failure.value.message
            const receipt = receiptOf(invocation, now, position, { reason })
            receiptRows.push({
              invocation_id: invocation.invocationId,
              intent: invocation.intent,
              outcome: "rejected",
              position,
              receipt: JSON.stringify(receipt)
            })
            decided.set(invocation.invocationId, { intent: invocation.intent, receipt })
            answers.push(Exit.fail(new OperationRejected({ message: reason, receipt })))
            note("rejected")
          } else if (Option.isSome(failure) && failure.value instanceof Inaccessible) {
            answers.push(Exit.fail(failure.value))
            note("inaccessible")
          } else {
            const error = yield* defect(
              exit.cause,
              "Operation handler failed; the invocation was rolled back and no receipt stored",
              invocation.operation
            ).pipe(Effect.locally(FiberRef.currentLogAnnotations, annotations))
            answers.push(Exit.die(error))
            note("defect")
          }
        }
        if (commitRows.length > 0) yield* sql`INSERT INTO ${sql(commitsTable)} ${sql.insert(commitRows)}`
        if (receiptRows.length > 0) yield* sql`INSERT INTO ${sql(receiptsTable)} ${sql.insert(receiptRows)}`
        if (options.beforeCommit) yield* options.beforeCommit
        return { answers, position, tally }
      }).pipe(sql.withTransaction)

    const runGroup = (items: ReadonlyArray<Item>) =>
      Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        yield* Metric.update(groupSize, items.length)
        // Statements get no spans of their own: the group's span covers them, at a fraction of the cost.
        const result = yield* Effect.exit(Effect.withTracerEnabled(transaction(items, now), false))
        if (Exit.isSuccess(result)) {
          committed = result.value.position
          yield* SubscriptionRef.set(published, committed)
          for (const [outcome, n] of Object.entries(result.value.tally)) yield* countOutcome(outcome, n)
          yield* Effect.forEach(items, (item, i) => Deferred.done(item.deferred, result.value.answers[i]!), { discard: true })
        } else {
          // The transaction failed as a whole (storage fault): nothing of the group was applied.
          yield* countWriteFault(result.cause)
          const error = yield* defect(result.cause, "Group commit failed; the whole group was rolled back")
          yield* countOutcome("defect", items.length)
          yield* Effect.forEach(items, (item) => Deferred.die(item.deferred, error), { discard: true })
        }
      }).pipe(
        Effect.withSpan("Writer.group", {
          root: true,
          attributes: { "cairn.group.size": items.length },
          // Every invocation's request span: the group is one hop of each of their traces.
          links: items.flatMap((item): Array<Tracer.SpanLink> => (item.span === undefined ? [] : [{ _tag: "SpanLink", span: item.span, attributes: {} }]))
        })
      )

    yield* Queue.takeBetween(queue, 1, options.maxBatch).pipe(
      Effect.tap((chunk) => Metric.incrementBy(queueDepth, -Chunk.size(chunk))),
      Effect.flatMap((chunk) => Effect.uninterruptible(runGroup(Chunk.toReadonlyArray(chunk)))),
      Effect.forever,
      // The drain fiber outlives the request that activated the database: it keeps none of its annotations.
      Effect.locally(FiberRef.currentLogAnnotations, HashMap.empty()),
      Effect.annotateLogs({ database: databaseId }),
      Effect.forkScoped
    )

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        closed = true
        const rest = yield* Queue.takeAll(queue)
        yield* Metric.incrementBy(queueDepth, -Chunk.size(rest))
        yield* Effect.forEach(rest, (item) => Deferred.fail(item.deferred, overloaded()), { discard: true })
        yield* Queue.shutdown(queue)
      })
    )

    // No span of its own: it is one hop inside `Mutate.mutate`'s span.
    const submit = (invocation: Invocation) =>
      Effect.suspend(() => {
        if (closed) return Effect.fail(overloaded())
        const deferred = Deferred.unsafeMake<Receipt, SubmitError>(FiberId.none)
        return Effect.flatMap(
          Effect.withFiberRuntime<boolean>((fiber) =>
            Queue.offer(queue, {
              invocation,
              deferred,
              annotations: fiber.getFiberRef(FiberRef.currentLogAnnotations),
              span: Option.getOrUndefined(Context.getOption(fiber.currentContext, Tracer.ParentSpan))
            })
          ),
          (accepted) =>
          accepted
            ? Effect.zipRight(Metric.increment(queueDepth), Deferred.await(deferred))
            : Effect.zipRight(countOutcome("overloaded"), Effect.fail(overloaded()))
        )
      })

    const compact = (through: number) =>
      Effect.suspend(() => sql.withTransaction(compactLog(sql, Math.min(through, committed)))).pipe(
        Effect.orDie,
        Effect.withSpan("Writer.compact")
      )

    return { submit, position: Effect.sync(() => committed), queued: Queue.size(queue), committed: published, compact }
  })

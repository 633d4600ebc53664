/**
 * The sync engine every transport calls with a verified principal, its view and its
 * database: snapshot pages of a scope, then the changes after a cursor, filtered
 * through the principal's policy, caught up and then live until the caller stops.
 */
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { InvalidQuery, type PublicError, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { type ChangesRequest, resnapshot, type SnapshotPage, type SnapshotRequest, syncEnd, type SyncMessage, type SyncRecord } from "@cairn/domain/Sync"
import { type Principal } from "@cairn/domain/Principal"
import { hotSpan } from "@cairn/domain/HotSpan"
import { type DatabaseId } from "@cairn/domain/Ids"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { Log } from "@cairn/store"
import { type ReadableDatabase } from "@cairn/store/Database"
import { Duration, Effect, Metric, Option, RcMap, Stream } from "effect"
import * as Hub from "./Hub.js"
import { narrowingOf, stateAtStart } from "./internal/replay.js"
import { type ResolvedScope, resolveScope, strip } from "./internal/scope.js"
import { readPage } from "./internal/snapshot.js"
import { SyncConfig } from "./SyncConfig.js"
import * as SyncCursor from "./SyncCursor.js"
import * as SyncLiveSink from "@cairn/domain/SyncLiveSink"
import * as SyncMetrics from "./SyncMetrics.js"

/** When the verified token expires (its `exp` claim, in epoch milliseconds), if it says. */
const expiryOf = (principal: Principal): number | undefined => {
  const exp = principal.claims["exp"]
  return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : undefined
}

const restartSnapshot = (why: string) =>
  new InvalidQuery({ message: `${why} Start the snapshot again without "after".` })

export class Sync extends Effect.Service<Sync>()("@cairn/sync/Sync", {
  scoped: Effect.gen(function* () {
    const sealer = yield* Sealer
    const config = yield* SyncConfig
    const limits = yield* QueryLimits
    /**
     * One hub per open database, held by each of its changes streams while it runs: the hub,
     * its fibers and the caches its streams share close with the database's last stream.
     */
    const hubs = yield* RcMap.make({ lookup: (database: ReadableDatabase) => Hub.make(database, config) })

    const bindingOf = (principal: Principal, view: View, database: ReadableDatabase, scope: ResolvedScope) =>
      Effect.map(
        database.reader.unsafe<{ readonly installed_at: string }>(`SELECT installed_at FROM ${Log.installTable} WHERE id = 1`),
        (found): SyncCursor.Binding => ({
          subject: principal.subject,
          database: SyncCursor.databaseDigest(principal.databaseKey, found[0]?.installed_at ?? ""),
          scope: scope.scopeDigest,
          access: scope.accessDigest,
          catalogToken: view.token
        })
      )

    /** One page of a snapshot of `request.scope`, as the principal may see it. */
    // A span without a captured stack: every snapshot page passes here.
    const snapshot = (principal: Principal, view: View, database: ReadableDatabase, request: SnapshotRequest) =>
      hotSpan("Sync.snapshot")(snapshotBody(principal, view, database, request))

    const snapshotBody = Effect.fnUntraced(function* (
      principal: Principal,
      view: View,
      database: ReadableDatabase,
      request: SnapshotRequest
    ) {
      // `request.ifCatalog` was checked by the engine (`DataPlane`) before the database was opened.
      const scope = yield* resolveScope(view, request.scope, limits)
      const binding = yield* Effect.orDie(bindingOf(principal, view, database, scope))
      let continuation: SyncCursor.Continuation | undefined
      if (request.after !== undefined) {
        continuation = SyncCursor.openContinuation(sealer, request.after)
        if (continuation === undefined || SyncCursor.mismatch(continuation, binding, (token) => view.admits(token, scope.entries.map((e) => CatalogVersion.entity(e.entity.name)))) !== undefined) {
          return yield* restartSnapshot("This snapshot continuation is not valid for this caller, scope or catalog.")
        }
        if (continuation.entry >= scope.entries.length) return yield* restartSnapshot("This snapshot continuation is not valid.")
      }
      const reader = database.reader
      const page = yield* Effect.orDie(
        reader.withTransaction(
          Effect.gen(function* () {
            const start = continuation ? continuation.start : yield* Log.lastPosition(reader)
            // A later page reads a later state than the snapshot's start (its checkpoint, where
            // replay resumes): the rows committed since are sent as they were at the start, else
            // the client would keep a record that appeared and left its view between the two
            // (replay decides each record from its state at the start, not from what a page sent).
            const last = continuation ? yield* Log.lastPosition(reader) : start
            let since: ReadonlyArray<Log.Commit> = []
            if (last > start) {
              if (last - start > config.maxReplayCommits || start < (yield* Log.watermark(reader))) return undefined
              since = yield* Log.commitsAfter(reader, start, last - start)
            }
            const narrowing = since.length > 0 ? narrowingOf(view.catalog, scope) : undefined
            let entry = continuation?.entry ?? 0
            let after = continuation?.after ?? null
            const records: Array<SyncRecord> = []
            let bytes = 0
            // The page's work budget, the queries' rows-examined notion: a scope few rows match ends
            // its page early (short, even empty) after the last row examined, and goes on from there.
            let examined = 0
            while (entry < scope.entries.length && records.length < config.pageRows && bytes < config.pageBytes && examined < limits.maxRowsExamined) {
              const scopeEntry = scope.entries[entry]!
              const part = yield* readPage({
                catalog: view.catalog,
                reader,
                entry: scopeEntry,
                after,
                maxRecords: config.pageRows - records.length,
                maxBytes: config.pageBytes - bytes,
                maxExamined: limits.maxRowsExamined - examined
              })
              examined += part.examined
              if (since.length > 0) {
                // This part covers the ids after `after` up to its last id (to the end when exhausted).
                const lower = after
                const upper = part.exhausted ? null : part.last
                const covers = (id: string) => (lower === null || id > lower) && (upper === null || id <= upper)
                const atStart = yield* stateAtStart({ catalog: view.catalog, entry: scopeEntry, reader, commits: since, covers, ...(narrowing ? { narrowing } : {}) })
                if (atStart.touched.size > 0) {
                  const kept = part.records.filter((r) => !atStart.touched.has(r.id))
                  for (const image of atStart.visible) {
                    kept.push({ entity: scopeEntry.entity.name, id: image["id"] as string, record: strip(scopeEntry, image) })
                  }
                  kept.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
                  records.push(...kept)
                } else records.push(...part.records)
              } else records.push(...part.records)
              bytes += part.bytes
              if (!part.exhausted) {
                after = part.last
                break
              }
              entry += 1
              after = null
            }
            return { start, entry, after, records, bytes }
          })
        )
      )
      if (page === undefined) return yield* restartSnapshot("The log moved too far past this snapshot's start.")
      const sent = (continuation?.sent ?? 0) + page.records.length
      if (sent > config.maxSnapshotRows) {
        return yield* new QueryBudgetExceeded({
          message: `This sync scope holds more than ${config.maxSnapshotRows} records. Narrow it with where filters or fewer entities.`,
          limit: "snapshot size"
        })
      }
      yield* Metric.increment(SyncMetrics.snapshotPages)
      yield* Metric.update(SyncMetrics.snapshotPageBytes, page.bytes)
      if (page.entry >= scope.entries.length) {
        yield* Metric.update(SyncMetrics.snapshotRecords, sent)
        const result: SnapshotPage = {
          records: page.records,
          checkpoint: SyncCursor.checkpoint(sealer, { ...binding, position: page.start })
        }
        return result
      }
      const result: SnapshotPage = {
        records: page.records,
        next: SyncCursor.sealContinuation(sealer, {
          ...binding,
          start: page.start,
          entry: page.entry,
          after: page.after,
          sent
        })
      }
      return result
    })

    /**
     * The changes after `request.cursor`: a resnapshot instruction when the cursor cannot
     * be resumed, else batches (each ending with a new checkpoint), live until the
     * caller disconnects unless `live` is false.
     */
    const changes = (
      principal: Principal,
      view: View,
      database: ReadableDatabase,
      request: ChangesRequest
    ): Stream.Stream<SyncMessage, PublicError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const scope = yield* resolveScope(view, request.scope, limits)
          const binding = yield* Effect.orDie(bindingOf(principal, view, database, scope))
          const cursor = SyncCursor.openCursor(sealer, request.cursor)
          // A cursor survives a catalog change unless a definition of its scope changed incompatibly.
          const reason = SyncCursor.mismatch(cursor, binding, (token) =>
            view.admits(token, scope.entries.map((e) => CatalogVersion.entity(e.entity.name)))
          )
          if (reason !== undefined) {
            yield* SyncMetrics.countResnapshot(reason)
            return Stream.make(resnapshot(reason))
          }
          yield* Metric.increment(SyncMetrics.resumes)
          const live = request.live ?? true
          // Every stream holds its database's hub: a live one waits in it, and every one shares its caches.
          const hub = yield* RcMap.get(hubs, database)
          const sink = Option.getOrUndefined(yield* Effect.serviceOption(SyncLiveSink.SyncLiveSink))
          // The stream's cursors: its binding sealed once, each position MACed (see `SyncCursor.checkpointer`).
          // A stream ends with its token: nothing is sent on it from the token's `exp` on (the hub
          // writes nothing directly past it either), and it ends with `SyncEnd` (`invalid_token`).
          const clock = yield* Effect.clock
          const expiresAt = expiryOf(principal)
          const expired = expiresAt === undefined ? () => false : () => clock.unsafeCurrentTimeMillis() >= expiresAt
          const subscriber = Hub.subscriber({ view, scope, subject: principal.subject, checkpoints: SyncCursor.streamCheckpoints(sealer, binding), sink, expired })
          if (live) yield* Effect.acquireRelease(Metric.increment(SyncMetrics.liveStreams), () => Metric.incrementBy(SyncMetrics.liveStreams, -1))
          /**
           * `behind`: the stream has not reached the tip, so it reads its next batch itself (without
           * waiting for a commit); at the tip a live stream waits in the hub. `upTo`: where a
           * `live: false` stream ends, the tip when it started.
           */
          type State = { readonly position: number; readonly first: boolean; readonly behind: boolean; readonly upTo: number | undefined }
          let ended = false
          const paged = Stream.paginateEffect({ position: cursor!.position, first: true, behind: true, upTo: undefined }, (state: State) =>
            Effect.gen(function* (): Effect.fn.Return<readonly [SyncMessage, Option.Option<State>]> {
              const step = yield* hub.next(subscriber, state.position, live && !state.behind, live ? undefined : state.upTo)
              if (expired()) {
                ended = true
                return [syncEnd("invalid_token"), Option.none()] as const
              }
              if (step.message._tag === "Resnapshot") {
                yield* SyncMetrics.countResnapshot(step.message.reason)
                return [step.message, Option.none()] as const
              }
              if (!state.first && step.newest !== undefined) yield* SyncMetrics.recordLag(step.newest)
              const upTo = state.upTo ?? step.tip
              const behind = step.position < (live ? step.tip : upTo)
              return [step.message, live || behind ? Option.some({ position: step.position, first: false, behind, upTo }) : Option.none()] as const
            })
          )
          if (expiresAt === undefined) return paged
          // Waiting for commits, the stream is ended at `exp` by the clock.
          const untilExpiry = Effect.sleep(Duration.millis(Math.max(0, expiresAt - clock.unsafeCurrentTimeMillis())))
          return Stream.concat(
            Stream.interruptWhen(paged, untilExpiry),
            Stream.suspend(() => (!ended && expired() ? Stream.make(syncEnd("invalid_token")) : Stream.empty))
          )
        })
      )

    /** Introspection: the databases whose hub is open now (while some changes stream of theirs runs). */
    const openHubs: Effect.Effect<ReadonlyArray<DatabaseId>> = Effect.map(RcMap.keys(hubs), (databases) => databases.map((d) => d.id))

    /**
     * The position a changes request's cursor stands at, if it is one of this deployment's: a copy
     * of the database must reach it before serving the stream (an older copy would take the cursor
     * for one from another history).
     */
    const cursorPosition = (cursor: string): number | undefined => SyncCursor.openCursor(sealer, cursor)?.position

    return { snapshot, changes, openHubs, cursorPosition } as const
  })
}) {}

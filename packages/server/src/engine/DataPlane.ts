/**
 * The one engine behind every way in. RPC (`/db/rpc`), sync (`/db/sync`) and MCP hand it
 * a verified principal and the request as it arrived; every verb then runs the same
 * pipeline: the token's scope → strict decode → the principal's policy view → `ifCatalog`
 * → the caller's database → the verb → a typed answer. Limits are applied here, once;
 * defects are logged under the request id and answered without internals. Transports
 * only authenticate and map `EngineError` to their wire. Which process runs the caller's
 * database is the `DatabaseRouter`'s to say (here, embedded); a process that runs it for
 * another calls `here`, the same pipeline without the routing step.
 */
import { File } from "@cairn/catalog"
import * as CatalogVersion from "@cairn/catalog/CatalogVersion"
import { DescribeLimits, describe } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { type View } from "@cairn/catalog/View"
import { BoundedJson } from "@cairn/domain"
import { hotSpan } from "@cairn/domain/HotSpan"
import { type AccessScope, readScope, writeScope } from "@cairn/domain/AccessScope"
import { CatalogChanged, InvalidInput, InvalidQuery } from "@cairn/domain/PublicError"
import { decodeDescribeRequest, decodeMutateRequest } from "@cairn/domain/RequestDecoders"
import { type DescribeResult } from "@cairn/domain/Describe"
import { type Principal } from "@cairn/domain/Principal"
import { type QueryResult } from "@cairn/domain/Query"
import { type Receipt } from "@cairn/domain/Receipt"
import { type SnapshotPage, type SyncMessage } from "@cairn/domain/Sync"
import { decodeQueryRequest } from "@cairn/query/QueryRequestDecoder"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { QueryPlanner } from "@cairn/query/QueryPlanner"
import { type ReadableDatabase } from "@cairn/store/Database"
import { type ActivationError, Databases, databaseId } from "@cairn/store/Databases"
import * as Position from "@cairn/domain/Position"
import { mutate } from "@cairn/store/Mutate"
import { decodeChangesRequest, decodeSnapshotRequest } from "@cairn/sync/SyncRequestDecoder"
import { Sync } from "@cairn/sync/Sync"
import { Cause, Clock, Context, Effect, Option, Predicate, type Scope, Stream } from "effect"
import { Correlation } from "./Correlation.js"
import { DatabaseRouter } from "./DatabaseRouter.js"
import * as EngineMetrics from "./EngineMetrics.js"
import { Deployment } from "./Deployment.js"
import { type Download, type FileError, Objects, type Uploaded, type UploadRequest } from "./Objects.js"
import { type EngineError, InsufficientScope, type InternalFailure, internalFailure, missingScope, scrubDefects, Unavailable } from "./Refusal.js"
import { Settings } from "../operations/Settings.js"

/** The engine's verbs, by name (logs and metrics). */
export type Verb = "describe" | "query" | "mutate" | "snapshot" | "changes"
/** The file verbs (`/db/objects`): the same admission, their own answers. */
export type FileVerb = "upload" | "download" | "link" | "resumable"

const requiredScope: Readonly<Record<Verb | FileVerb, AccessScope>> = {
  describe: readScope,
  query: readScope,
  snapshot: readScope,
  changes: readScope,
  mutate: writeScope,
  upload: writeScope,
  download: readScope,
  link: readScope,
  resumable: writeScope
}

/** Everything a file verb can answer besides its result. */
export type FileVerbError = FileError | InsufficientScope | InternalFailure

/** How a query's `File` values carry their url: the gated download path (bearer token), or a signed link (MCP agents). */
export interface QueryOptions {
  readonly fileLinks?: "gated" | "signed"
}

export class DataPlane extends Effect.Service<DataPlane>()("@cairn/server/DataPlane", {
  effect: Effect.gen(function* () {
    const { policy } = yield* Deployment
    const databases = yield* Databases
    const planner = yield* QueryPlanner
    const sync = yield* Sync
    // The operator's budgets, applied to decoding and planning alike.
    const queryLimits = yield* QueryLimits
    const describeLimits = yield* DescribeLimits
    const sealer = yield* Sealer
    const objects = yield* Objects
    const { baseUrl } = yield* Settings
    const router = yield* DatabaseRouter

    // One context provided once per verb (each `provide` is a context swap of its own).
    const limits = Context.make(QueryLimits, queryLimits).pipe(Context.add(DescribeLimits, describeLimits), Context.add(Sealer, sealer))
    const withLimits = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, limits)

    /**
     * What every verb does first: the token's scope (which depends only on the verb, so
     * a token that may not call it learns nothing from its payload and costs no decoding),
     * then the strict decode under the operator's budgets, then the principal's view.
     */
    const admit = <Req, E extends EngineError>(
      verb: Verb,
      principal: Principal,
      payload: unknown,
      decode: (payload: unknown) => Effect.Effect<Req, E, QueryLimits>
    ) =>
      Effect.gen(function* () {
        const scope = requiredScope[verb]
        if (!principal.scopes.includes(scope)) {
          return yield* new InsufficientScope({
            scope,
            message: missingScope(scope)
          })
        }
        // Nothing recursive (schema decoding, issue reports) sees a payload beyond the JSON bounds.
        const refused = BoundedJson.check(payload)
        if (Option.isSome(refused)) {
          const issues = [{ path: "/", message: refused.value.reason }]
          return yield* verb === "mutate"
            ? new InvalidInput({ message: refused.value.reason, issues })
            : new InvalidQuery({ message: refused.value.reason, issues })
        }
        const request = yield* decode(payload)
        return { request, view: policy.view(principal) }
      })

    /** Checked only against the definitions the request touches (see `CatalogVersion`). */
    const ifCatalog = (view: View, token: string | undefined, touched: () => ReadonlyArray<CatalogVersion.Touched>) =>
      token === undefined || token === view.token || view.admits(token, touched())
        ? Effect.void
        : Effect.fail(
            new CatalogChanged({
              message: "The catalog changed since the token in ifCatalog was issued. Call describe, then rebuild the request.",
              catalogToken: view.token
            })
          )

    /** The caller's database for the current scope; a failure to open it is the operator's, logged by reference. */
    const unavailable = (error: unknown) =>
      Effect.gen(function* () {
        // Held by an operator's action (an online restore): expected, brief, and nothing to report.
        if (Predicate.isTagged(error, "ActivationError") && typeof (error as { readonly held?: unknown }).held === "string") {
          return yield* new Unavailable({ message: "Your database is under maintenance for a moment; nothing was applied. Retry shortly." })
        }
        // A refusal by the deployment's rule (the database limit) says what it is; the store logged it.
        const refusal = (error as { readonly _tag?: unknown; readonly publicMessage?: unknown })._tag === "ActivationError" ? (error as ActivationError).publicMessage : undefined
        if (refusal !== undefined) return yield* new Unavailable({ message: refusal })
        const requestId = yield* Correlation.id
        yield* Effect.logError("database unavailable", error)
        return yield* new Unavailable({
          message: `Your database cannot be opened right now; this was logged as ${requestId}. Retry later, or report that reference to the operator.`
        })
      })
    const open = (principal: Principal) => Effect.catchAll(databases.activate(principal.databaseKey), unavailable)

    /**
     * The caller's database for a read that stays on this process (live changes, downloads): its own
     * file, or in a cluster a followed copy (none in time: a retryable refusal, the client resumes).
     */
    const readHere = (principal: Principal, atLeast = 0): Effect.Effect<ReadableDatabase, Unavailable, Scope.Scope> => {
      const copies = router.copies
      if (copies === undefined) return open(principal)
      return Effect.flatMap(copies(principal, atLeast), (copy) =>
        Option.isSome(copy)
          ? Effect.succeed(copy.value)
          : Effect.flatMap(Correlation.id, (requestId) =>
              Effect.fail(
                new Unavailable({
                  message: `Your database cannot be read on this server right now; this was logged as ${requestId}. Retry shortly.`
                })
              )
            )
      )
    }

    /** A read's `atLeast` (checked when decoded), as a position. */
    const atLeastOf = (atLeast: string | undefined): number => (atLeast === undefined ? 0 : (Position.decode(atLeast) ?? 0))

    const describeVerb = (principal: Principal, payload: unknown): Effect.Effect<DescribeResult, EngineError> =>
      Effect.gen(function* () {
        const { request, view } = yield* admit("describe", principal, payload, decodeDescribeRequest)
        return yield* describe(view, request)
      }).pipe(withLimits, scrubDefects("describe"), EngineMetrics.instrument("describe"), hotSpan("DataPlane.describe"))

    /**
     * For a caller without a bearer token of `/db` (an MCP agent): each visible `File` value's url
     * becomes a short-lived signed link for that caller (absolute), which re-checks the policy when used.
     */
    const signFileLinks = (principal: Principal, result: QueryResult) =>
      Effect.map(Clock.currentTimeMillis, (now): QueryResult => {
        const sign = (value: unknown): unknown => {
          if (typeof value !== "object" || value === null) return value
          if (Array.isArray(value)) return value.map(sign)
          const record = value as Record<string, unknown>
          if (typeof record["objectId"] === "string" && record["url"] === File.downloadPath(record["objectId"])) {
            return { ...record, url: `${baseUrl}${objects.sealLink(principal, record["objectId"], now).url}` }
          }
          return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, sign(v)]))
        }
        return { ...result, rows: result.rows.map((row) => sign(row) as (typeof result.rows)[number]) }
      })

    /** A query admitted; `routed`: through the router (a front), else always here (the process running the database). */
    const queryWith = (routed: boolean) => (principal: Principal, payload: unknown) =>
      Effect.gen(function* () {
        const { request, view } = yield* admit("query", principal, payload, decodeQueryRequest)
        yield* ifCatalog(view, request.ifCatalog, () => CatalogVersion.touchedByQuery(view.catalog, request.query))
        const run = (database: ReadableDatabase) =>
          planner.run({
            view,
            principal,
            // The read client only if the planner needs it (its page goes through `values`): it is built on first use.
            database: {
              id: database.id,
              get sql() {
                return database.reader
              },
              values: database.values
            },
            request
          })
        // The database held for the read without a scope of its own (the store's cheap lease).
        const here = databases.withDatabase(principal.databaseKey, run).pipe(Effect.catchTag("ActivationError", (error) => unavailable(error)))
        if (!routed) return yield* here
        const copies = router.copies
        if (copies === undefined) return yield* router.query(principal, payload, here)
        // A followed copy at the caller's position when this process has one in time; else the writer answers.
        return yield* Effect.scoped(
          Effect.flatMap(copies(principal, atLeastOf(request.atLeast)), (copy) =>
            Option.isSome(copy) ? run(copy.value) : router.query(principal, payload, here)
          )
        )
      })

    const queryVerb = (routed: boolean) => (principal: Principal, payload: unknown, options?: QueryOptions): Effect.Effect<QueryResult, EngineError> =>
      queryWith(routed)(principal, payload).pipe(
        // Signed here, by the process the caller asked (its base URL), wherever the rows were read.
        Effect.flatMap((result) => (options?.fileLinks === "signed" ? signFileLinks(principal, result) : Effect.succeed(result))),
        withLimits, scrubDefects("query"), EngineMetrics.instrument("query"), hotSpan("DataPlane.query"))

    const mutateVerb = (routed: boolean) => (principal: Principal, payload: unknown): Effect.Effect<Receipt, EngineError> =>
      Effect.gen(function* () {
        const { request, view } = yield* admit("mutate", principal, payload, decodeMutateRequest)
        yield* Correlation.note({ invocationId: request.invocationId })
        yield* ifCatalog(view, request.ifCatalog, () => {
          const { owner, name } = request.operation
          return [CatalogVersion.operation(owner.name, name), CatalogVersion.entity(owner.name)]
        })
        // The database held for the call without a scope of its own (the store's cheap lease).
        const here = databases.withDatabase(principal.databaseKey, (database) =>
          mutate({ view, principal, request, database, resolve: (operation, input) => objects.resolve(database, operation, input) })
        ).pipe(Effect.catchTag("ActivationError", (error) => unavailable(error)))
        // Admitted here first: the cheap refusals never cost a hop to the writer's process.
        return yield* routed ? router.mutate(principal, payload, here) : here
      }).pipe(
        withLimits,
        Effect.tapBoth({
          onSuccess: (receipt) => Correlation.note({ outcome: receipt.outcome }),
          onFailure: (error) => Correlation.note({ outcome: "code" in error ? error.code : error._tag })
        }),
        scrubDefects("mutate"), EngineMetrics.instrument("mutate"), hotSpan("DataPlane.mutate"))

    const snapshotVerb = (routed: boolean) => (principal: Principal, payload: unknown): Effect.Effect<SnapshotPage, EngineError> =>
      Effect.gen(function* () {
        const { request, view } = yield* admit("snapshot", principal, payload, decodeSnapshotRequest)
        yield* ifCatalog(view, request.ifCatalog, () => request.scope.entities.map((e) => CatalogVersion.entity(e.from.name)))
        const here = Effect.flatMap(open(principal), (database) => sync.snapshot(principal, view, database, request))
        if (!routed) return yield* here
        const copies = router.copies
        if (copies === undefined) return yield* router.snapshot(principal, payload, here)
        const copy = yield* copies(principal, atLeastOf(request.atLeast))
        return yield* Option.isSome(copy) ? sync.snapshot(principal, view, copy.value, request) : router.snapshot(principal, payload, here)
      }).pipe(withLimits, Effect.scoped, scrubDefects("snapshot"), EngineMetrics.instrument("snapshot"), hotSpan("DataPlane.snapshot"))

    /** Everything up to the first batch is admitted like any verb; the stream then holds the database open. */
    const changesVerb = (principal: Principal, payload: unknown): Stream.Stream<SyncMessage, EngineError> =>
      Stream.unwrapScoped(
        Effect.gen(function* () {
          const { request, view } = yield* admit("changes", principal, payload, decodeChangesRequest)
          // Never forwarded: a live stream follows the database's own file here, or a followed copy of it
          // (a copy behind the caller's cursor simply sends nothing until it passes it).
          // A copy at the cursor's position if one gets there in time; else whatever copy there is, and
          // the sync engine tells the cursor's history from another's (resnapshot) as on one process.
          const at = sync.cursorPosition(request.cursor) ?? 0
          const database = yield* (at === 0 ? readHere(principal) : Effect.orElse(readHere(principal, at), () => readHere(principal)))
          return sync.changes(principal, view, database, request)
        }).pipe(withLimits, scrubDefects("changes"))
      ).pipe(
        Stream.catchAllCause((cause) =>
          Option.isSome(Cause.failureOption(cause)) || Cause.isInterruptedOnly(cause)
            ? Stream.failCause(cause)
            : Stream.fromEffect(Effect.flatMap(internalFailure("changes", cause), Effect.fail))
        ),
        EngineMetrics.instrumentStream("changes")
      )

    /** A file verb's admission: the token's scope first (as for every verb), then the caller's open database. */
    const admitFile = (verb: FileVerb, principal: Principal) =>
      Effect.gen(function* () {
        const scope = requiredScope[verb]
        if (!principal.scopes.includes(scope)) return yield* new InsufficientScope({ scope, message: missingScope(scope) })
        return yield* readHere(principal)
      })
    /**
     * An upload's database, by id: its bytes go to the deployment's object store whichever process
     * takes them (a cluster's is shared), and only a mutation binds them to a record, on the writer.
     */
    const admitUpload = (verb: FileVerb, principal: Principal) =>
      Effect.gen(function* () {
        const scope = requiredScope[verb]
        if (!principal.scopes.includes(scope)) return yield* new InsufficientScope({ scope, message: missingScope(scope) })
        if (router.copies !== undefined) return databaseId(principal.databaseKey)
        return (yield* open(principal)).id
      })

    /** Streams an upload into the caller's database under every file limit; answers its upload handle. */
    const uploadVerb = (principal: Principal, request: UploadRequest): Effect.Effect<Uploaded, FileVerbError> =>
      Effect.scoped(Effect.flatMap(admitUpload("upload", principal), (id) => objects.upload(id, request))).pipe(
        scrubDefects("upload"),
        EngineMetrics.instrument("upload"),
        Effect.withSpan("DataPlane.upload")
      )

    /** The file `objectId`, while the caller can see a record holding it (the policy checked now), or the `Range` asked. */
    const downloadVerb = (principal: Principal, objectId: string, range: string | undefined): Effect.Effect<Download, FileVerbError> =>
      Effect.scoped(
        Effect.flatMap(admitFile("download", principal), (database) => objects.download(policy.view(principal), database, objectId, range))
      ).pipe(scrubDefects("download"), EngineMetrics.instrument("download"), Effect.withSpan("DataPlane.download"))

    /** A short-lived signed link to `objectId` for the caller, if they can see it now. */
    const linkVerb = (principal: Principal, objectId: string): Effect.Effect<{ url: string; expiresAt: string }, FileVerbError> =>
      Effect.scoped(
        Effect.flatMap(admitFile("link", principal), (database) => objects.link(principal, policy.view(principal), database, objectId))
      ).pipe(scrubDefects("link"), EngineMetrics.instrument("link"), Effect.withSpan("DataPlane.link"))

    /** One request of the resumable upload protocol (TUS 1.0), in the caller's open database. */
    const resumableVerb = (principal: Principal, request: Request): Effect.Effect<Response, FileVerbError> =>
      Effect.scoped(
        Effect.flatMap(admitUpload("resumable", principal), (id) => Effect.promise(() => objects.resumable.handle(principal, id, request)))
      ).pipe(scrubDefects("resumable"), EngineMetrics.instrument("resumable"), Effect.withSpan("DataPlane.resumable"))

    return {
      describe: describeVerb,
      query: queryVerb(true),
      mutate: mutateVerb(true),
      snapshot: snapshotVerb(true),
      changes: changesVerb,
      upload: uploadVerb,
      download: downloadVerb,
      link: linkVerb,
      resumable: resumableVerb,
      /** The principal a signed download link stands for, while it is valid (then `download` as them). */
      linkPrincipal: objects.linkPrincipal,
      /**
       * The verbs the router forwards, as the process running the caller's database serves them
       * for another process: the same pipeline (admission included), never routed again. Query
       * results come unsigned: the process the caller asked signs file links with its own base URL.
       */
      here: {
        query: (principal: Principal, payload: unknown) => queryVerb(false)(principal, payload),
        mutate: mutateVerb(false),
        snapshot: snapshotVerb(false)
      }
    } as const
  }),
  // The store (`Databases`) is the role's: embedded `DatabasesLive`, or a cluster's archived one.
  dependencies: [QueryPlanner.Default, Sync.Default, Objects.Default]
}) {}

/** The engine's verbs, for code that takes them as a value. */
export type DataPlaneShape = DataPlane

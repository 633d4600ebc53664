/**
 * `npm run bench -- mirrors`: each mirror of a library's internals (docs/mirrors.md) against the
 * upstream path it stands in for, on the same input in the same process: CPU µs per call of each,
 * alternated in rounds (the machine is shared and drifts), median of the rounds. Prints one line
 * per mirror, `mirror <name>: mirror_us=.. upstream_us=.. saved_us=..`; docs/mirrors.md relates
 * `saved_us` to the CPU time of the request path it sits on (`npm run bench -- http`).
 * RequestBody is measured by the http bench's floor pair; DirectToolCall and DirectTransport, whose
 * gain is large, end to end (see docs/mirrors.md); writeNow saves latency, not CPU.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Rpc, RpcGroup, RpcSerialization, RpcServer } from "@effect/rpc"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Cause, Context, Effect, FiberId, FiberRef, FiberRefs, HashMap, HashSet, Layer, List, Logger, LogLevel, Runtime, Schema, Scope } from "effect"
import * as Redaction from "@cairn/domain/Redaction"
import { nestedParse } from "@cairn/domain/NestedParse"
import { plainParse } from "@cairn/domain/PlainParse"
import { MutateRequest } from "@cairn/domain/Mutate"
import { QueryRequest } from "@cairn/domain/Query"
import { Comparison, type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { strictParse } from "@cairn/domain/StrictParse"
import { lineFormatter } from "@cairn/server/LogFormat"
import { Created, Task, TaskCreate, tracker } from "@cairn/testkit/fixture/tracker"
import { logInfoWith } from "../../packages/server/src/internal/logInfoWith.js"
import * as RpcExchange from "../../packages/server/src/internal/rpcExchange.js"
import * as Connection from "../../packages/store/src/internal/connection.js"
import { compile } from "@cairn/catalog/Catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { Policy } from "@cairn/policy"
import { defaultQueryLimits } from "@cairn/query/QueryLimits"
import { trackerPolicy } from "@cairn/testkit/fixture/policy"
import { plan } from "../../packages/query/src/internal/plan.js"
import * as PlanCache from "../../packages/query/src/internal/planCache.js"
import { pageStatement } from "../../packages/query/src/internal/statement.js"

const ROUNDS = Number(process.env["BENCH_MIRRORS_ROUNDS"] ?? 7)

/** This process's CPU time in µs: unlike wall time, it does not count the time other processes took the cores. */
const cpu = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

/** CPU µs per call of `f`, over about `ms` milliseconds of CPU. */
const time = (f: () => unknown, ms: number): number => {
  let n = 0
  const began = cpu()
  let now = began
  while (now - began < ms * 1000) {
    for (let i = 0; i < 50; i++) f()
    n += 50
    now = cpu()
  }
  return (now - began) / n
}
const timeAsync = async (f: () => Promise<unknown>, ms: number): Promise<number> => {
  let n = 0
  const began = cpu()
  let now = began
  while (now - began < ms * 1000) {
    for (let i = 0; i < 10; i++) await f()
    n += 10
    now = cpu()
  }
  return (now - began) / n
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const report = (name: string, mine: ReadonlyArray<number>, theirs: ReadonlyArray<number>) => {
  const m = median(mine)
  const t = median(theirs)
  console.log(`mirror ${name}: mirror_us=${m.toFixed(2)} upstream_us=${t.toFixed(2)} saved_us=${(t - m).toFixed(2)} (rounds: mirror ${mine.map((x) => x.toFixed(1)).join("/")}, upstream ${theirs.map((x) => x.toFixed(1)).join("/")})`)
}

/** Alternates the two synchronous paths, after checking they answer alike. */
const pair = (name: string, mirror: () => unknown, upstream: () => unknown, ms = 150) => {
  if (JSON.stringify(mirror()) !== JSON.stringify(upstream())) throw new Error(`${name}: the mirror and upstream answer differently`)
  for (let i = 0; i < 2; i++) time(mirror, ms), time(upstream, ms)
  const mine: Array<number> = []
  const theirs: Array<number> = []
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) mine.push(time(mirror, ms)), theirs.push(time(upstream, ms))
    else theirs.push(time(upstream, ms)), mine.push(time(mirror, ms))
  }
  report(name, mine, theirs)
}

const pairAsync = async (name: string, mirror: () => Promise<unknown>, upstream: () => Promise<unknown>, ms = 300) => {
  const [a, b] = [await mirror(), await upstream()]
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${name}: the mirror and upstream answer differently: ${JSON.stringify(a)} / ${JSON.stringify(b)}`)
  for (let i = 0; i < 2; i++) await timeAsync(mirror, ms), await timeAsync(upstream, ms)
  const mine: Array<number> = []
  const theirs: Array<number> = []
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) mine.push(await timeAsync(mirror, ms)), theirs.push(await timeAsync(upstream, ms))
    else theirs.push(await timeAsync(upstream, ms)), mine.push(await timeAsync(mirror, ms))
  }
  report(name, mine, theirs)
}

// The http bench's requests: a page of 50 Tasks by assignee, and one Task.create.
const queryRequest = {
  query: {
    version: 1,
    from: { kind: "entity", name: "Task" },
    where: { op: "eq", path: ["assigneeId"], value: "u3" },
    select: { id: { path: ["id"] }, title: { path: ["title"] }, status: { path: ["status"] }, priority: { path: ["priority"] } },
    page: { first: 50 }
  }
}
const at = "2026-01-01T00:00:00.000Z"
const taskRecord = { id: "01J0000000000000000000000A", projectId: "01J0000000000000000000000B", title: "task 7", status: "open", assigneeId: "u7", priority: 3, createdAt: at, updatedAt: at }

const parsers = () => {
  const strictFirst = { onExcessProperty: "error", errors: "first" } as const
  const upstreamQuery = Schema.decodeUnknownEither(QueryRequest, strictFirst)
  const nested = nestedParse(QueryRequest.ast, strictFirst, upstreamQuery)
  pair("NestedParse (query request, strict)", () => nested(queryRequest), () => upstreamQuery(queryRequest))
  const upstreamNode = Schema.decodeUnknownEither(Comparison, strictFirst)
  const nestedNode = nestedParse(Comparison.ast, strictFirst, upstreamNode)
  const node = queryRequest.query.where
  pair("NestedParse (one filter node, strict)", () => nestedNode(node), () => upstreamNode(node))

  // decodeStrict's chain as Decode.ts builds it (nested, then strict over plain), against the strict parse it stands in for.
  const chain = (schema: Schema.Schema<any, any>) => {
    const upstream = Schema.decodeUnknownEither(schema, strictFirst)
    return { upstream, mirror: nestedParse(schema.ast, strictFirst, strictParse(schema.ast, upstream, plainParse(schema.ast, Schema.decodeUnknownEither(schema, { errors: "first" })))) }
  }
  const mutateRequest = { operation: { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "create" }, input: { projectId: "01J0000000000000000000000B", title: "task 7", assigneeId: "u7", priority: 3 }, invocationId: "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b" }
  const mutate = chain(MutateRequest)
  pair("decodeStrict chain (mutate request)", () => mutate.mirror(mutateRequest), () => mutate.upstream(mutateRequest))
  const input = chain(TaskCreate.input as Schema.Schema<any, any>)
  pair("decodeStrict chain (Task.create input)", () => input.mirror(mutateRequest.input), () => input.upstream(mutateRequest.input))
  const output = Schema.encodeUnknownEither(Created as Schema.Schema<any, any>)
  const plainOutput = plainParse(Created.ast, output)
  pair("PlainParse (operation output, encode)", () => plainOutput({ id: "01J0000000000000000000000A" }), () => output({ id: "01J0000000000000000000000A" }))

  const record = Task.record as unknown as Schema.Schema<Record<string, unknown>, Record<string, unknown>>
  const upstreamDecode = Schema.decodeUnknownEither(record)
  const plain = plainParse(record.ast, upstreamDecode)
  pair("PlainParse (Task record, decode)", () => plain(taskRecord), () => upstreamDecode(taskRecord))

  const upstreamStrict = Schema.encodeUnknownEither(record, { onExcessProperty: "error" })
  const strict = strictParse(record.ast, upstreamStrict, Schema.encodeUnknownEither(record))
  pair("StrictParse alone (Task record, strict encode, lenient parse upstream's)", () => strict(taskRecord), () => upstreamStrict(taskRecord))
  const strictPlain = strictParse(record.ast, upstreamStrict, plainParse(record.ast, Schema.encodeUnknownEither(record)))
  pair("StrictParse+PlainParse (Task record, strict encode, as tx.ts)", () => strictPlain(taskRecord), () => upstreamStrict(taskRecord))
}

const logging = async () => {
  // A request line as the front logs it, with the request id annotated as the front does.
  const fields = { requestId: "01J00000000000000000000000", method: "POST", route: "/db/rpc", status: 200, durationMs: 3, traceId: "4bf92f3577b34da6a3ce929d0e0e4736", invocationId: undefined, outcome: "committed" }
  const annotations = HashMap.fromIterable(Object.entries(fields).filter(([, v]) => v !== undefined))
  const options: Logger.Logger.Options<unknown> = {
    fiberId: FiberId.make(1, 0),
    logLevel: LogLevel.Info,
    message: ["POST /db/rpc 200 3ms"],
    cause: Cause.empty,
    context: FiberRefs.unsafeMake(new Map()),
    spans: List.empty(),
    annotations,
    date: new Date(at)
  }
  const direct = lineFormatter("json")
  const general = Redaction.logger(Logger.jsonLogger)
  pair("LogFormat (json line)", () => direct.log(options), () => general.log(options))
  const logfmtDirect = lineFormatter("logfmt")
  const logfmtGeneral = Redaction.logger(Logger.logfmtLogger)
  pair("LogFormat (logfmt line)", () => logfmtDirect.log(options), () => logfmtGeneral.log(options))

  // logInfoWith against logInfo under annotateLogs, to a logger that keeps nothing, inside an annotated fiber.
  let seen = 0
  const sink = Logger.make(() => void (seen += 1))
  const runtime = Effect.runSync(Effect.runtime<never>().pipe(Effect.provide(Logger.replace(Logger.defaultLogger, sink))))
  const run = Runtime.runSync(runtime)
  const date = new Date(at)
  const mine = Effect.annotateLogs(logInfoWith("POST /db/rpc 200 3ms", fields, date), "requestId", "r")
  const theirs = Effect.annotateLogs(Effect.logInfo("POST /db/rpc 200 3ms").pipe(Effect.annotateLogs(fields)), "requestId", "r")
  pair("logInfoWith (request line)", () => run(mine), () => run(theirs))
  if (seen === 0) throw new Error("nothing was logged")
}

class Group extends RpcGroup.make(
  Rpc.make("Query", { payload: Schema.Unknown, success: Schema.Struct({ rows: Schema.Array(Schema.Unknown) }), error: Schema.String })
) {}

const rpc = async () => {
  const scope = Effect.runSync(Scope.make())
  const { exchange, upstream } = await Effect.runPromise(
    Effect.gen(function* () {
      const exchange = yield* RpcExchange.make(Group, { tracing: false })
      const upstream = yield* RpcServer.toHttpApp(Group, { disableFatalDefects: true, disableTracing: true })
      return { exchange, upstream }
    }).pipe(
      Effect.provide(Layer.mergeAll(Group.toLayer({ Query: () => Effect.succeed({ rows: [] }) }), RpcSerialization.layerJson)),
      Scope.extend(scope)
    )
  )
  const body = JSON.stringify({ _tag: "Request", id: "1", tag: "Query", payload: queryRequest, headers: [] })
  const call = (app: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>) => () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const request = HttpServerRequest.fromWeb(new Request("http://bench/db/rpc", { method: "POST", body, headers: { "content-type": "application/json" } }))
        const response = yield* Effect.scoped(Effect.provideService(app, HttpServerRequest.HttpServerRequest, request))
        return yield* Effect.promise(() => HttpServerResponse.toWeb(response).text())
      }) as Effect.Effect<string>
    )
  await pairAsync("rpcExchange (one JSON request, handler answering at once)", call(exchange), call(upstream))
  await Effect.runPromise(Scope.close(scope, Effect.void.pipe(Effect.exit) as never))
}

const sqlite = async () => {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-mirrors-"))
  const scope = Effect.runSync(Scope.make())
  const { opened, upstream } = await Effect.runPromise(
    Effect.gen(function* () {
      const opened = yield* Connection.open({ filename: join(dir, "mine.sqlite") })
      const upstream = yield* SqliteClient.make({ filename: join(dir, "mine.sqlite") })
      yield* opened.sql.unsafe(`CREATE TABLE "Task" (id TEXT PRIMARY KEY, title TEXT, status TEXT, priority INTEGER, assigneeId TEXT)`)
      yield* opened.sql.unsafe(`CREATE INDEX "Task_assignee" ON "Task" (assigneeId)`)
      yield* opened.sql.withTransaction(
        Effect.forEach(Array.from({ length: 2000 }, (_, i) => i), (i) => opened.sql`INSERT INTO "Task" ${opened.sql.insert({ id: `t${String(i).padStart(5, "0")}`, title: `task ${i}`, status: "open", priority: (i % 5) + 1, assigneeId: `u${i % 10}` })}`, { discard: true })
      )
      return { opened, upstream }
    }).pipe(Effect.provide(Reactivity.layer), Scope.extend(scope))
  )
  const page = `SELECT id, title, status, priority FROM "Task" WHERE assigneeId = ? ORDER BY id LIMIT 51`
  const params = ["u3"]
  // The hot path's read (`Raw.values`, synchronous) against the same read through SqliteClient.
  await pairAsync(
    "connection (50-row page: raw values vs SqliteClient .values)",
    () => Promise.resolve(opened.raw.values(page, params)),
    () => Effect.runPromise(upstream.unsafe(page, params).values)
  )
  await pairAsync(
    "connection's @effect/sql face (50-row page .values vs SqliteClient .values)",
    () => Effect.runPromise(opened.sql.unsafe(page, params).values),
    () => Effect.runPromise(upstream.unsafe(page, params).values)
  )
  await Effect.runPromise(Scope.close(scope, Effect.void.pipe(Effect.exit) as never))
}

class Marker extends Context.Tag("bench/Marker")<Marker, number>() {}

/** The writer's refs restorer (`refsRestorer` in Writer.ts): the fiber's own `setFiberRefs` against `Effect.setFiberRefs`. */
const refs = () => {
  // The refs of a fiber as a writer group runs in, about 20 (Writer.ts): services, log annotations,
  // a log span, a minimum level, and others stood in for by refs of its own.
  let read: Effect.Effect<FiberRefs.FiberRefs> = Effect.getFiberRefs.pipe(
    Effect.annotateLogs({ requestId: "r", database: "acme" }),
    Effect.withLogSpan("writer"),
    Logger.withMinimumLogLevel(LogLevel.Warning),
    Effect.provideService(Marker, 1)
  )
  for (let i = 0; i < 16; i++) read = Effect.locally(read, FiberRef.unsafeMake(0), i + 1)
  const captured = Effect.runSync(read)
  const direct = Effect.withFiberRuntime<void>((fiber) => {
    ;(fiber as unknown as { setFiberRefs: (refs: FiberRefs.FiberRefs) => void }).setFiberRefs(captured)
    return Effect.void
  })
  const upstream = Effect.setFiberRefs(captured)
  pair(`Writer refsRestorer (${HashSet.size(FiberRefs.fiberRefs(captured))} refs)`, () => Effect.runSync(direct), () => Effect.runSync(upstream))
}

/**
 * The planner's statement for the http bench's page (a fresh principal's view each request, as the
 * App builds it): planned and built (`plan`, `pageStatement`) against the plan cache's hit.
 */
const plans = () => {
  const catalog = Effect.runSync(compile(tracker))
  const policy = Effect.runSync(Policy.compile(catalog, trackerPolicy))
  const limits = defaultQueryLimits
  const viewOf = () =>
    policy.view(new Principal({ subject: "bench", roles: ["admin"], scopes: [], claims: { sub: "bench" }, databaseKey: DatabaseKey.make("bench") }))
  let n = 0
  const doc = (): QueryDocumentV1 => ({ ...(queryRequest.query as unknown as QueryDocumentV1), where: { op: "eq", path: ["assigneeId"], value: `u${n++ % 10}` } } as QueryDocumentV1)
  const cache = new PlanCache.Lru<PlanCache.Entry>(64)
  const cached = () => {
    const view = viewOf()
    const document = doc()
    const cls = PlanCache.classOf(view)!
    const shape = PlanCache.shapeOf(document, limits.maxFilterNodes)!
    const key = `${cls.id} ${shape.key}`
    let entry = cache.get(key)
    if (entry === undefined || !PlanCache.valuesFit(entry, shape)) {
      entry = PlanCache.makeEntry(view, cls, document, plan(view, document, limits) as never, limits)
      cache.set(key, entry)
    }
    const statement = PlanCache.compiled(entry, PlanCache.cursorShape(undefined))
    return [statement.text, PlanCache.bind(statement, shape.values, cls.values, undefined)]
  }
  const uncached = () => {
    const view = viewOf()
    const document = doc()
    const statement = pageStatement(view, plan(view, document, limits) as never, undefined, limits.maxRowsExamined)
    return [statement.sql.text, statement.sql.params]
  }
  n = 0
  const a = JSON.stringify(cached())
  n = 0
  if (a !== JSON.stringify(uncached())) console.log(`planCache: the cached statement's text differs from the planned one (same rows; compared by PlanCache.test.ts)`)
  pairLoose("planCache (the bench's page: cache hit vs plan + pageStatement, view per request)", cached, uncached)
}

/** As `pair`, without comparing the answers (the cache's statement text may differ in form, not in rows). */
const pairLoose = (name: string, mirror: () => unknown, upstream: () => unknown, ms = 150) => {
  for (let i = 0; i < 2; i++) time(mirror, ms), time(upstream, ms)
  const mine: Array<number> = []
  const theirs: Array<number> = []
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) mine.push(time(mirror, ms)), theirs.push(time(upstream, ms))
    else theirs.push(time(upstream, ms)), mine.push(time(mirror, ms))
  }
  report(name, mine, theirs)
}

export const run = async (): Promise<void> => {
  plans()
  refs()
  parsers()
  await logging()
  await rpc()
  await sqlite()
}

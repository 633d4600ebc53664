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
import { Effect, Layer, Schema, Scope } from "effect"
import { type QueryDocumentV1 } from "@cairn/domain/QueryDocument"
import { tracker } from "@cairn/testkit/fixture/tracker"
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

// The http bench's query request: a page of 50 Tasks by assignee.
const queryRequest = {
  query: {
    version: 1,
    from: { kind: "entity", name: "Task" },
    where: { op: "eq", path: ["assigneeId"], value: "u3" },
    select: { id: { path: ["id"] }, title: { path: ["title"] }, status: { path: ["status"] }, priority: { path: ["priority"] } },
    page: { first: 50 }
  }
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
  await rpc()
  await sqlite()
}

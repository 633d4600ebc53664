// Traces and logs through the real App. An in-process OTLP/HTTP receiver (node:http, the JSON
// encoding the exporter sends) collects the spans of real requests: one request's trace runs
// front → DataPlane verb → activation (→ SQL for a query), and the writer's group span links
// back to the mutation's trace. Every request logs one structured JSON line with its request id,
// trace id, route pattern, status and duration (a mutation's also its invocation id and
// outcome). Planted secrets — the bearer token, claim values, a payload value, a query value —
// appear in no log line, no span attribute or failure, and no error body.
import { createServer, type IncomingMessage } from "node:http"
import * as Redaction from "@cairn/domain/Redaction"
import { assert, describe, it } from "@effect/vitest"
import { freePort } from "@cairn/testkit/freePort"
import { mcp, rpc, sync } from "@cairn/testkit/Wire"
import { Effect, Logger, LogLevel, Schedule } from "effect"
import { v7 as uuidv7 } from "uuid"
import { startApp } from "./support/app.js"
import { createProject, entity, projects } from "./support/requests.js"

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: unknown }>
  readonly links?: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
}

/** An OTLP/HTTP trace receiver on a free loopback port: every body received, and the spans decoded from them. */
const receiver = Effect.gen(function* () {
  const port = yield* freePort()
  const bodies: Array<string> = []
  const spans: Array<OtlpSpan> = []
  const read = (request: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let body = ""
      request.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve(body))
    })
  const server = createServer((request, response) => {
    void read(request).then((body) => {
      if (request.method === "POST" && request.url === "/v1/traces") {
        assert.match(String(request.headers["content-type"]), /application\/json/)
        bodies.push(body)
        for (const resource of JSON.parse(body).resourceSpans ?? []) {
          for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []))
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => void server.listen(port, "127.0.0.1", () => resume(Effect.void))),
    () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )
  return { endpoint: `http://127.0.0.1:${port}`, bodies, spans }
})


const secrets = {
  subject: "sub-PLANTED-7f3a",
  org: "org-PLANTED-91c2",
  title: "title-PLANTED-5d0e",
  queried: "query-PLANTED-c41b",
  invalid: "payload-PLANTED-2b8f"
}

describe("traces and logs through the real App", () => {
  it.scopedLive("one request's trace, one JSON line per request, and no planted secret anywhere", () =>
    Effect.gen(function* () {
      const otlp = yield* receiver
      const lines: Array<string> = []
      const capture = Logger.map(Redaction.logger(Logger.jsonLogger), (line) => void lines.push(line))
      const app = yield* startApp({ env: { CAIRN_OTLP_ENDPOINT: otlp.endpoint }, logger: capture, logLevel: LogLevel.Info })
      const token = yield* app.token({ sub: secrets.subject, org: secrets.org })
      const agentToken = yield* app.token({ sub: secrets.subject, org: secrets.org, resource: "mcp" })
      const bodies: Array<string> = []

      const invocationId = uuidv7()
      const created = yield* rpc(app, token, "Mutate", createProject(secrets.title, invocationId))
      assert.strictEqual(created.value?.outcome, "committed", created.text)
      const mutationRequestId = created.headers.get("x-request-id")!
      const queried = yield* rpc(app, token, "Query", { query: { ...projects, where: { op: "eq", path: ["name"], value: secrets.queried } } })
      assert.strictEqual(queried.status, 200, queried.text)
      const queryRequestId = queried.headers.get("x-request-id")!
      // Refusals whose bodies must not echo what was sent.
      bodies.push((yield* rpc(app, token, "Mutate", { ...createProject(secrets.title, uuidv7()), input: { name: { nested: secrets.invalid } } })).text)
      bodies.push((yield* rpc(app, token, "Query", { query: { ...projects, where: { op: "eq", path: ["name"], value: { nested: secrets.invalid } } } })).text)
      bodies.push((yield* mcp(app, agentToken, "mutate", { ...createProject(secrets.title, uuidv7()), input: { name: [secrets.invalid] } })).text)
      bodies.push((yield* sync(app, token, "SyncSnapshot", { scope: { entities: [{ from: entity("Project"), where: { op: "in", path: ["name"], value: [1, { secret: secrets.invalid }] } }] } })).text)
      bodies.push((yield* rpc(app, `${token}x`, "Query", { query: projects })).text)
      for (const body of bodies) assert.isAbove(body.length, 0)

      // The exporter sends every second: wait until both requests' server spans and the writer's group arrived.
      const front = (requestId: string) => {
        const line = lines.map((l) => JSON.parse(l)).find((l) => l.annotations?.requestId === requestId && l.annotations?.route !== undefined)
        return line as { annotations: Record<string, unknown> } | undefined
      }
      const traceOf = (requestId: string) => front(requestId)?.annotations.traceId as string | undefined
      yield* Effect.suspend(() => {
        const ready = [mutationRequestId, queryRequestId].every((id) => {
          const traceId = traceOf(id)
          return traceId !== undefined && otlp.spans.some((s) => s.traceId === traceId && s.name === "http.front")
        })
        return ready && otlp.spans.some((s) => s.name === "Writer.group") ? Effect.void : Effect.fail("not yet")
      }).pipe(Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 100 }))

      // One structured line per request.
      const mutationLine = front(mutationRequestId)!.annotations
      assert.strictEqual(mutationLine.route, "/db/rpc")
      assert.strictEqual(mutationLine.status, 200)
      assert.isNumber(mutationLine.durationMs)
      assert.match(String(mutationLine.traceId), /^[0-9a-f]{32}$/)
      assert.strictEqual(mutationLine.invocationId, invocationId)
      assert.strictEqual(mutationLine.outcome, "committed")
      const queryLine = front(queryRequestId)!.annotations
      assert.strictEqual(queryLine.route, "/db/rpc")
      assert.isUndefined(queryLine.invocationId)

      // The mutation's trace: front → DataPlane.mutate → activation, and the group linked to it.
      const mutationTrace = otlp.spans.filter((s) => s.traceId === traceOf(mutationRequestId))
      const byId = new Map(mutationTrace.map((s) => [s.spanId, s]))
      const ancestors = (span: OtlpSpan): Array<string> => {
        const parent = span.parentSpanId ? byId.get(span.parentSpanId) : undefined
        return parent ? [parent.name, ...ancestors(parent)] : []
      }
      const verb = mutationTrace.find((s) => s.name === "DataPlane.mutate")
      assert.isDefined(verb, mutationTrace.map((s) => s.name).join(", "))
      assert.include(ancestors(verb!), "http.front")
      const activation = mutationTrace.find((s) => s.name === "Databases.activate")
      assert.isDefined(activation, mutationTrace.map((s) => s.name).join(", "))
      assert.include(ancestors(activation!), "DataPlane.mutate")
      const group = otlp.spans.find((s) => s.name === "Writer.group" && (s.links ?? []).some((l) => l.traceId === traceOf(mutationRequestId)))
      assert.isDefined(group, "the writer group links to the mutation's trace")
      assert.isTrue((group!.links ?? []).every((l) => byId.has(l.spanId) || l.traceId !== traceOf(mutationRequestId)))
      // The query's trace reaches its SQL statements.
      const queryTrace = otlp.spans.filter((s) => s.traceId === traceOf(queryRequestId))
      const statement = queryTrace.find((s) => s.name.startsWith("sql."))
      assert.isDefined(statement, queryTrace.map((s) => s.name).join(", "))

      // No planted secret in any log line, span or error body; nor the token itself.
      const planted = [...Object.values(secrets), token, agentToken]
      const logs = lines.join("\n")
      const spans = otlp.bodies.join("\n")
      for (const secret of planted) {
        assert.notInclude(logs, secret, "a log line carries a planted secret")
        assert.notInclude(spans, secret, "a span carries a planted secret")
        for (const body of bodies) assert.notInclude(body, secret, `an error body carries a planted secret: ${body.slice(0, 300)}`)
      }
    }), 60_000)
  it.scopedLive("an upstream traceparent names the trace logged, with or without an exporter", () =>
    Effect.gen(function* () {
      const otlp = yield* receiver
      for (const env of [{}, { CAIRN_OTLP_ENDPOINT: otlp.endpoint }]) {
        const lines: Array<string> = []
        const capture = Logger.map(Redaction.logger(Logger.jsonLogger), (line) => void lines.push(line))
        const app = yield* startApp({ env, logger: capture, logLevel: LogLevel.Info })
        const token = yield* app.token({ sub: "tracer", org: "org-trace" })
        const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
        const response = yield* Effect.promise(() =>
          fetch(`${app.base}/db/rpc`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json", traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
            body: JSON.stringify({ _tag: "Request", id: "1", tag: "Query", payload: { query: projects }, headers: [] })
          })
        )
        assert.strictEqual(response.status, 200)
        const requestId = response.headers.get("x-request-id")
        yield* Effect.promise(() => response.text())
        const line = lines.map((l) => JSON.parse(l)).find((l) => l.annotations?.requestId === requestId && l.annotations?.route !== undefined)
        assert.strictEqual(line?.annotations.traceId, traceId, JSON.stringify(env))
      }
    })
  )
})

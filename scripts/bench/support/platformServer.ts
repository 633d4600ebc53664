/**
 * Benchmark child: the floor of the App's stack for `npm run bench -- http`. The raw server's
 * read (`rawServer.ts`: its own file, read-only, the same prepared page SELECT and answer)
 * served through @effect/platform as the App is — `NodeHttpServer` + `HttpLayerRouter`, the
 * platform's own request span off as in the App without an exporter — with nothing of Cairn's
 * around it. What the App costs above this is Cairn's; what this costs above the raw server is
 * the platform's. With a second argument `lean`, the body is read as the App reads it
 * (`@cairn/server/RequestBody`'s `bodyText`, not the platform's `request.text`): the floor under
 * the App's own body reading. Prints `{ base }`, answers `stats` lines like appServer.
 */
import { createServer } from "node:http"
import { createInterface } from "node:readline"
import { HttpLayerRouter, HttpMiddleware, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { bodyText } from "@cairn/server/http/RequestBody"
import { freePort } from "@cairn/testkit/freePort"

// The raw server's own file (its path is the one argument), read-only: the same rows it reads.
const db = new Database(process.argv[2]!, { readonly: true })
const lean = process.argv[3] === "lean"
const page = db.prepare(`SELECT "id", "title", "status", "priority" FROM "Task" WHERE "assigneeId" = ? ORDER BY "id" LIMIT 51`)

const read = HttpLayerRouter.add(
  "POST",
  "/read",
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = JSON.parse(yield* (lean ? bodyText(request) : request.text)) as Record<string, unknown>
    const rows = page.all(body["assigneeId"]) as Array<Record<string, unknown>>
    return HttpServerResponse.text(JSON.stringify({ items: rows.slice(0, 50), hasMore: rows.length > 50 }), { contentType: "application/json" })
  }).pipe(Effect.orDie)
)

const main = Effect.gen(function* () {
  const port = yield* freePort()
  const serve = HttpMiddleware.withTracerDisabledWhen(HttpLayerRouter.serve(read, { disableListenLog: true, disableLogger: true }), () => true)
  // Built, so listening, before the base URL is announced.
  yield* Layer.build(serve.pipe(Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" }))))
  process.stdout.write(JSON.stringify({ base: `http://127.0.0.1:${port}` }) + "\n")
  const lines = createInterface({ input: process.stdin })
  lines.on("line", () => {
    const cpu = process.cpuUsage()
    process.stdout.write(JSON.stringify({ cpuUs: cpu.user + cpu.system, groups: 0, groupedWrites: 0 }) + "\n")
  })
  lines.on("close", () => process.exit(0))
  return yield* Effect.never
})

Effect.runPromise(Effect.scoped(main)).catch((error) => {
  console.error(error)
  process.exit(1)
})

/**
 * The sync bench's clients, in their own process (`scripts/bench/sync.ts` forks it) so the
 * server's process runs only the server. Over IPC it is sent `{ url, tokens }`; it takes each
 * client's snapshot, opens its live changes stream and answers `{ ready: true }` once every
 * client is caught up. Then, for each `{ title }` it is sent, it answers with every client's
 * arrival time of that title, on the clock shared with the parent (`performance.timeOrigin +
 * performance.now()`). It exits when its IPC channel closes.
 */
import { SyncClient } from "@cairn/client/SyncClient"
import { snapshotCursor } from "@cairn/testkit/snapshotCursor"
import { type SyncScope } from "@cairn/domain/Sync"
import * as http from "node:http"
import { Deferred, Effect, Exit, Logger, LogLevel } from "effect"

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }
const now = () => performance.timeOrigin + performance.now()

type Request = { readonly url: string; readonly tokens: ReadonlyArray<string> } | { readonly title: string }

const send = (message: unknown) => process.send!(message)

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity })
let target: URL
/** Opens one live changes stream (@effect/rpc's NDJSON framing) and hands each chunk of text read to `onText`. */
const listen = (token: string, cursor: string, onText: (text: string) => void) => {
  const request = http.request(target, {
    method: "POST",
    agent,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/ndjson" }
  }, (response) => {
    response.setEncoding("utf8")
    let pending = ""
    response.on("data", (text: string) => {
      // Whole lines only: a message split across reads counts when its end arrives.
      const end = text.lastIndexOf("\n")
      if (end === -1) {
        pending += text
        return
      }
      const lines = pending + text.slice(0, end + 1)
      pending = text.slice(end + 1)
      onText(lines)
    })
  })
  request.on("error", (error) => {
    console.error(error)
    process.exit(1)
  })
  request.end(JSON.stringify({ _tag: "Request", id: "1", tag: "SyncChanges", payload: { scope: tasks, cursor }, headers: [] }) + "\n")
}

const start = (url: string, tokens: ReadonlyArray<string>) => {
  target = new URL(url)
  const arrivals = tokens.map(() => new Map<unknown, number>())
  let waiting: { readonly title: string } | undefined
  const check = () => {
    if (waiting === undefined) return
    const title = waiting.title
    if (!arrivals.every((a) => a.has(title))) return
    waiting = undefined
    send({ title, arrivals: arrivals.map((a) => a.get(title)!) })
  }
  process.on("message", (message: Request) => {
    if ("title" in message) {
      waiting = message
      check()
    }
  })
  return Effect.scoped(
    Effect.gen(function* () {
      const ready = yield* Effect.forEach(
        tokens,
        (token, i) =>
          Effect.gen(function* () {
            const rpc = yield* SyncClient.http({ url, token: Effect.succeed(token) })
            const cursor = yield* snapshotCursor(rpc, tasks)
            // The live stream over plain node:http: the arrival time is the moment its bytes are read,
            // so the client's own decoding does not count against the server.
            const caughtUp = yield* Deferred.make<void>()
            listen(token, cursor, (text) => {
              const at = now()
              for (const title of text.matchAll(/"title":"((?:[^"\\]|\\.)*)"/g)) if (!arrivals[i]!.has(title[1])) arrivals[i]!.set(title[1], at)
              if (text.includes('"_tag":"Resnapshot"') || text.includes('"_tag":"Exit"')) {
                console.error(`client ${i}: unexpected ${text.slice(0, 200)}`)
                process.exit(1)
              }
              Deferred.unsafeDone(caughtUp, Exit.void)
              check()
            })
            return caughtUp
          }),
        { concurrency: 50 }
      )
      yield* Effect.forEach(ready, Deferred.await, { discard: true })
      send({ ready: true })
      yield* Effect.never
    })
  )
}

process.once("message", (message: Request) => {
  if (!("url" in message)) return
  Effect.runPromise(start(message.url, message.tokens).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))).catch((error) => {
    console.error(error)
    process.exit(1)
  })
})
process.on("disconnect", () => process.exit(0))

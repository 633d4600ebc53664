/**
 * The sync bench's clients, in their own process (`scripts/bench/sync.ts` forks it) so the
 * server's process runs only the server. Over IPC it is sent `{ url, tokens }`; it takes each
 * client's snapshot, opens its live changes stream and answers `{ ready: true }` once every
 * client is caught up. Then, for each `{ title }` it is sent, it answers with every client's
 * arrival time of that title, on the clock shared with the parent (`performance.timeOrigin +
 * performance.now()`). It exits when its IPC channel closes.
 */
import { SyncClient } from "@cairn/client/SyncClient"
import { type SyncScope } from "@cairn/domain/Sync"
import { Deferred, Effect, Logger, LogLevel, Stream } from "effect"

const tasks: SyncScope = { entities: [{ from: { kind: "entity", name: "Task" } }] }
const now = () => performance.timeOrigin + performance.now()

type Request = { readonly url: string; readonly tokens: ReadonlyArray<string> } | { readonly title: string }

const send = (message: unknown) => process.send!(message)

const start = (url: string, tokens: ReadonlyArray<string>) => {
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
            let after: string | undefined
            let cursor: string | undefined
            while (cursor === undefined) {
              const page = yield* rpc.SyncSnapshot({ scope: tasks, ...(after ? { after } : {}) })
              cursor = page.checkpoint?.cursor
              after = page.next
            }
            const caughtUp = yield* Deferred.make<void>()
            yield* rpc.SyncChanges({ scope: tasks, cursor }).pipe(
              Stream.runForEach((message) =>
                message._tag !== "SyncBatch"
                  ? Effect.dieMessage(`unexpected ${message._tag}`)
                  : Effect.sync(() => {
                      const at = now()
                      for (const change of message.changes) {
                        if (change._tag === "Upsert" && !arrivals[i]!.has(change.record["title"])) arrivals[i]!.set(change.record["title"], at)
                      }
                      check()
                    }).pipe(Effect.zipRight(Deferred.succeed(caughtUp, undefined)))
              ),
              Effect.forkScoped
            )
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

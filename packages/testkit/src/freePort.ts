/**
 * A TCP port free on 127.0.0.1 right now, for a server a test or script is about to start.
 * Ports are drawn at random below Linux's ephemeral range (32768+), so a port handed out
 * here is not given to the many sockets that bind port 0 meanwhile, and test files running
 * in parallel processes rarely draw the same one; each is checked by binding it first, and
 * one process never hands out the same port twice.
 */
import { createServer } from "node:net"
import { Effect } from "effect"

const low = 20_000
const high = 32_000
const handedOut = new Set<number>()

const bindable = (port: number): Promise<boolean> =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

export const freePortPromise = async (): Promise<number> => {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (handedOut.has(port)) continue
    if (await bindable(port)) {
      handedOut.add(port)
      return port
    }
  }
  throw new Error(`no free port found in ${low}..${high} after 200 attempts`)
}

export const freePort = (): Effect.Effect<number> => Effect.promise(freePortPromise)

/** A TCP port free on 127.0.0.1 right now, for a server a test or script is about to start. */
import { createServer } from "node:net"
import { Effect } from "effect"

export const freePortPromise = (): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export const freePort = (): Effect.Effect<number> => Effect.promise(freePortPromise)

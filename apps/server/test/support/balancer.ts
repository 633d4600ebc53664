// A TCP load balancer on 127.0.0.1, as in front of a real cluster: each connection goes to the next
// backend that is still alive (round robin); a backend that refuses or drops the connection drops the
// client's too, and the client retries as it would behind any balancer.
import { createConnection, createServer, type Socket } from "node:net"

export interface Balancer {
  readonly port: number
  readonly close: () => Promise<void>
}

/** Listens on `port`, forwarding every connection to one of `backends()` (ports; asked per connection). */
export const startBalancer = (port: number, backends: () => ReadonlyArray<number>): Promise<Balancer> =>
  new Promise((resolve, reject) => {
    let next = 0
    const sockets = new Set<Socket>()
    const track = (socket: Socket) => {
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
      // Errors end the pair (below); a reset from either side is expected when a backend dies.
      socket.on("error", () => socket.destroy())
    }
    const server = createServer((client) => {
      track(client)
      const alive = backends()
      if (alive.length === 0) return client.destroy()
      const target = alive[next++ % alive.length]!
      const upstream = createConnection({ host: "127.0.0.1", port: target })
      track(upstream)
      client.pipe(upstream)
      upstream.pipe(client)
      client.once("close", () => upstream.destroy())
      upstream.once("close", () => client.destroy())
    })
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () =>
      resolve({
        port,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    )
  })

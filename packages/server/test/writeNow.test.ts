import { createServer, get, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { writeNow } from "../src/internal/writeNow.js"

/** A chunked response whose headers have left, and what its client received in the end. */
const withResponse = (body: (response: ServerResponse) => void) =>
  new Promise<string>((resolve, reject) => {
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/plain" })
      response.flushHeaders()
      const ready = () => (response.socket!.writableLength === 0 ? body(response) : setImmediate(ready))
      setImmediate(ready)
    })
    server.listen(0, "127.0.0.1", () => {
      get({ host: "127.0.0.1", port: (server.address() as AddressInfo).port }, (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (d: string) => (text += d))
        res.on("end", () => server.close(() => resolve(text)))
      }).on("error", reject)
    })
  })

describe("writeNow", () => {
  it("hands a chunk to the socket before the next tick, where a plain write holds it until then; the client gets both in order", async () => {
    let direct = -1
    let plain = -1
    let corked = -1
    const received = await withResponse((response) => {
      const socket = response.socket!
      writeNow(response, "now,", () => {})
      direct = socket.writableLength
      corked = socket.writableCorked
      response.write("later")
      plain = socket.writableLength
      response.end()
    })
    assert.strictEqual(direct, 0)
    assert.strictEqual(corked, 0)
    assert.isAbove(plain, 0)
    assert.strictEqual(received, "now,later")
  })

  it("leaves a cork it did not add", async () => {
    let corked = -1
    const received = await withResponse((response) => {
      const socket = response.socket!
      socket.cork()
      writeNow(response, "held", () => {})
      corked = socket.writableCorked
      socket.uncork()
      response.end()
    })
    assert.strictEqual(corked, 1)
    assert.strictEqual(received, "held")
  })
})

import { createServer, get, type ServerResponse } from "node:http"
import { type AddressInfo, connect } from "node:net"
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

/** The raw body bytes (chunk framing included) of a response `body` writes after its headers, as a client reads them off the wire. */
const rawBody = (flush: boolean, body: (response: ServerResponse) => void) =>
  new Promise<string>((resolve, reject) => {
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/plain" })
      if (flush) response.flushHeaders()
      body(response)
      response.end()
    })
    server.listen(0, "127.0.0.1", () => {
      const socket = connect((server.address() as AddressInfo).port, "127.0.0.1", () => socket.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
      const parts: Array<Buffer> = []
      socket.on("data", (d: Buffer) => parts.push(d))
      socket.on("error", reject)
      socket.on("end", () => {
        const raw = Buffer.concat(parts).toString("latin1")
        server.close(() => resolve(raw.slice(raw.indexOf("\r\n\r\n") + 4)))
      })
    })
  })

describe("writeNow", () => {
  it("after the headers, sends exactly the bytes write would (size line, chunk, CRLF), multi-byte text included", async () => {
    const chunks = ["one,", "é\u2028✓ two", "{\"_tag\":\"Chunk\"}\n"]
    const plain = await rawBody(true, (response) => chunks.forEach((c) => response.write(c)))
    const now = await rawBody(true, (response) => chunks.forEach((c) => writeNow(response, c, () => {})))
    assert.strictEqual(now, plain)
    assert.include(now, `${Buffer.byteLength(chunks[1]!).toString(16)}\r\n${Buffer.from(chunks[1]!).toString("latin1")}\r\n`)
  })

  it("before the headers have left, writes through the response (headers first, then the chunk)", async () => {
    const plain = await rawBody(false, (response) => response.write("first"))
    const now = await rawBody(false, (response) => writeNow(response, "first", () => {}))
    assert.strictEqual(now, plain)
    assert.strictEqual(now, "5\r\nfirst\r\n0\r\n\r\n")
  })


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

// The front's global behaviour against a real server: correlation ids on every answer,
// the body limit (declared or streamed, counted in bytes), the overall request timeout,
// and one log line per request that never holds tokens, query strings or payloads.
import { request as httpRequest } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { type Front, startFront } from "./FrontStack.js"

interface Answer {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly text: string
}

/** A raw HTTP exchange; without `contentLength` the body is streamed chunked, so only the server's reading can enforce the limit. */
const send = (url: string, options: { method?: string; headers?: Record<string, string>; chunks?: ReadonlyArray<string>; contentLength?: number } = {}) =>
  Effect.async<Answer>((resume) => {
    const req = httpRequest(
      url,
      {
        method: options.method ?? "GET",
        headers: { ...options.headers, ...(options.contentLength !== undefined ? { "content-length": String(options.contentLength) } : {}) }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (d: string) => (text += d))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, text })))
      }
    )
    req.on("error", (error) => resume(Effect.die(error)))
    for (const chunk of options.chunks ?? []) req.write(chunk)
    req.end()
  })

const rpc = (tag: string, payload: unknown) => JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })

const authorized = (front: Front) =>
  Effect.map(front.token({ sub: "alice", org: "acme" }), (token) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" }))

describe("front", () => {
  it.scopedLive("gives every answer its own opaque x-request-id, also in error bodies", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const first = yield* send(`${front.base}/health`)
      const second = yield* send(`${front.base}/health`)
      expect(first.status).toBe(200)
      expect(first.headers["x-request-id"]).toMatch(/^[A-Za-z0-9_-]{16}$/)
      expect(second.headers["x-request-id"]).not.toBe(first.headers["x-request-id"])
      const missing = yield* send(`${front.base}/nowhere`)
      expect(missing.status).toBe(404)
      expect(JSON.parse(missing.text)).toEqual({ error: "not_found", message: "No route serves this method and path.", requestId: missing.headers["x-request-id"] })
    })
  )

  it.scopedLive("refuses bodies over the limit, declared or streamed, counting bytes; accepts one exactly at it", () =>
    Effect.gen(function* () {
      const limit = 2048
      const front = yield* startFront({ limits: { maxBodyBytes: limit } })
      const headers = yield* authorized(front)
      const describeBody = rpc("Describe", { browse: { kinds: ["entity"] } })
      const exactly = describeBody + " ".repeat(limit - Buffer.byteLength(describeBody))

      const atLimit = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [exactly], contentLength: limit })
      expect(atLimit.status).toBe(200)
      const streamedAtLimit = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [exactly.slice(0, 1000), exactly.slice(1000)] })
      expect(streamedAtLimit.status).toBe(200)

      // Declared too large: refused before authentication, without reading the body.
      const declared = yield* send(front.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, chunks: [exactly + " "], contentLength: limit + 1 })
      expect(declared.status).toBe(413)
      expect(JSON.parse(declared.text)).toEqual({
        error: "payload_too_large",
        message: expect.stringContaining(`limit of ${limit} bytes`),
        requestId: declared.headers["x-request-id"],
        limitBytes: limit
      })

      const streamed = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [exactly, " "] })
      expect(streamed.status).toBe(413)
      expect(JSON.parse(streamed.text).error).toBe("payload_too_large")

      // Under the limit in characters, over it in bytes.
      const search = rpc("Describe", { search: "é".repeat(200) })
      const wide = search + " ".repeat(limit - 50 - search.length)
      expect(wide.length).toBeLessThan(limit)
      expect(Buffer.byteLength(wide)).toBeGreaterThan(limit)
      const multibyte = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [wide] })
      expect(multibyte.status).toBe(413)
    })
  )

  it.scopedLive("abandons a request at the overall timeout with a clear error, and keeps serving", () =>
    Effect.gen(function* () {
      const front = yield* startFront({ limits: { requestTimeoutMs: 300 } })
      const headers = yield* authorized(front)
      const slow = rpc("Query", { query: { version: 1, from: { kind: "entity", name: "Task" }, select: {}, page: { first: 999 } } })
      const answer = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [slow] })
      expect(answer.status).toBe(504)
      expect(JSON.parse(answer.text)).toEqual({
        error: "timeout",
        message: expect.stringContaining("did not complete within 300 ms"),
        requestId: answer.headers["x-request-id"]
      })
      // The abandoned RPC is interrupted, not left running.
      yield* Effect.repeat(Effect.sync(front.journal), { until: (j) => j.includes("slow query interrupted"), schedule: Schedule.spaced("20 millis") })
      expect(front.journal()).not.toContain("slow query completed")
      const next = yield* send(front.rpcUrl, { method: "POST", headers, chunks: [rpc("Describe", { browse: { kinds: ["entity"] } })] })
      expect(next.status).toBe(200)
    })
  )

  it.scopedLive("logs one line per request: method, route pattern, status, duration, id; never tokens, query strings or payloads", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const headers = yield* authorized(front)
      const marker = "zebra-payload-marker"
      const answers = [
        { expected: "POST /db/rpc 200", answer: yield* send(front.rpcUrl, { method: "POST", headers, chunks: [rpc("Describe", { search: marker })] }) },
        { expected: "POST /db/rpc 401", answer: yield* send(front.rpcUrl, { method: "POST", headers: { authorization: "Bearer eyJhbGciOiJub25lIn0.e30.", "content-type": "application/json" }, chunks: [rpc("Describe", { search: marker })] }) },
        { expected: "GET /health 200", answer: yield* send(`${front.base}/health?access_token=SECRETQUERYTOKEN`) },
        { expected: "GET (unmatched) 404", answer: yield* send(`${front.base}/secret-path-segment`) }
      ]
      const logs = front.logs()
      for (const { expected, answer } of answers) {
        const id = answer.headers["x-request-id"] as string
        const lines = logs.filter((line) => line.includes(`requestId=${id}`) && line.includes("level=INFO"))
        expect(lines, expected).toHaveLength(1)
        expect(lines[0], expected).toMatch(new RegExp(`message="${expected.replace(/[()]/g, "\\$&")} \\d+ms"`))
        // The same facts as fields (in any order), for JSON and logfmt readers: id, method, route pattern, status, duration, trace id.
        const [method, route, status] = expected.split(" ")
        const fields = ` ${lines[0]!} `
        for (const field of [`requestId=${id}`, `method=${method}`, `route=${route}`, `status=${status}`]) expect(fields, expected).toContain(` ${field} `)
        expect(fields, expected).toMatch(/ durationMs=\d+ /)
        expect(fields, expected).toMatch(/ traceId=[0-9a-f]{32} /)
      }
      const all = logs.join("\n")
      for (const secret of [headers.authorization.slice("Bearer ".length), marker, "SECRETQUERYTOKEN", "secret-path-segment", "eyJhbGciOiJub25lIn0"]) {
        expect(all).not.toContain(secret)
      }
    })
  )
})

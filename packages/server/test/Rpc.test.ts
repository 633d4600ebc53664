// The /db/rpc transport over raw HTTP against a real front: authentication before the RPC
// layer (401/400 with WWW-Authenticate), the principal taken only from the verified token,
// public errors inside RPC exits, overload as 503 + Retry-After, defects without leaks.
import { describe, expect, it } from "@effect/vitest"
import { InternalError } from "@cairn/domain/InternalError"
import { Effect } from "effect"
import { generateKeyPair, SignJWT } from "jose"
import { engine, type Front, mint, secretDefect, startFront } from "./FrontStack.js"

const request = (tag: string, payload: unknown, headers: ReadonlyArray<readonly [string, string]> = []) =>
  JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers })

const post = (front: Front, body: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(front.rpcUrl, { method: "POST", headers: { "content-type": "application/json", ...headers }, body })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

const browse = request("Describe", { browse: { kinds: ["entity"] } })
const queryTask = (extra: Record<string, unknown> = {}) =>
  request("Query", { query: { version: 1, from: { kind: "entity", name: "Task" }, select: { title: { path: ["title"] } }, ...extra } })
const mutate = (targetId: string, invocationId: string) =>
  request("Mutate", {
    operation: { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "complete" },
    target: { kind: "entity", entity: "Task", id: targetId },
    invocationId
  })

/** The single RPC exit of a JSON response. */
const exitOf = (text: string) => {
  const messages = JSON.parse(text) as Array<{ _tag: string; exit: { _tag: string; value?: any; cause?: any } }>
  expect(messages).toHaveLength(1)
  expect(messages[0]!._tag).toBe("Exit")
  return messages[0]!.exit
}

describe("/db/rpc", () => {
  it.scopedLive("serves Describe, Query and Mutate to a verified caller; the principal comes only from the token", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme", roles: ["admin"] })
      const described = yield* post(front, browse, bearer(token))
      expect(described.status).toBe(200)
      const cards = exitOf(described.text).value.cards.map((c: any) => c.ref.name)
      expect(cards).toEqual(["Comment", "Label", "Member", "Project", "Task"])

      // A second token smuggled in the RPC message headers must not replace the HTTP one.
      const other = yield* front.token({ sub: "mallory", org: "globex" })
      const queried = yield* post(front, request("Query", JSON.parse(queryTask()).payload, [["authorization", `Bearer ${other}`]]), bearer(token))
      const row = exitOf(queried.text).value.rows[0]
      expect({ subject: row.subject, org: row.org, roles: row.roles }).toEqual({ subject: "alice", org: "acme", roles: "admin" })

      const mutated = yield* post(front, mutate("t1", "0190a5b0-0000-7000-8000-000000000001"), bearer(token))
      expect(exitOf(mutated.text).value).toMatchObject({ outcome: "committed", invocationId: "0190a5b0-0000-7000-8000-000000000001" })
    })
  )

  it.scopedLive("public errors travel as tagged domain errors inside the RPC exit", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const invalid = yield* post(front, request("Query", { query: { version: 1, from: { kind: "entity", name: "Nope" }, select: {} } }), bearer(token))
      expect(invalid.status).toBe(200)
      expect(exitOf(invalid.text)).toEqual({ _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "InvalidQuery", message: 'No entity named "Nope" is defined.' } } })
      const hidden = yield* post(front, mutate("hidden", "0190a5b0-0000-7000-8000-000000000002"), bearer(token))
      expect(exitOf(hidden.text).cause.error).toEqual({ _tag: "Inaccessible", message: "That target cannot be revealed." })
    })
  )

  it.scopedLive("the engine decodes requests strictly: a malformed one is a typed InvalidQuery or InvalidInput with its issues", () =>
    Effect.gen(function* () {
      const front = yield* startFront({ plane: engine })
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const failure = (text: string) => {
        const exit = exitOf(text)
        expect(exit._tag).toBe("Failure")
        expect(exit.cause._tag).toBe("Fail")
        return exit.cause.error as { _tag: string; message: string; issues: Array<{ path: string; message: string }> }
      }
      const badVersion = failure((yield* post(front, request("Query", { query: { version: 2, from: { kind: "entity", name: "Task" }, select: {} } }), bearer(token))).text)
      expect(badVersion._tag).toBe("InvalidQuery")
      expect(badVersion.issues.map((i) => i.path)).toEqual(["/query/version"])
      expect(badVersion.message).toMatch(/^The query request is malformed: \/query\/version: /)

      const extraKey = failure((yield* post(front, request("Describe", { browse: { kinds: ["entity"] }, everything: true }), bearer(token))).text)
      expect(extraKey._tag).toBe("InvalidQuery")
      expect(extraKey.issues.map((i) => i.path)).toEqual(["/everything"])

      const noInvocation = failure(
        (yield* post(front, request("Mutate", { operation: { kind: "operation", owner: { kind: "entity", name: "Task" }, name: "complete" } }), bearer(token))).text
      )
      expect(noInvocation._tag).toBe("InvalidInput")
      expect(noInvocation.issues.map((i) => i.path)).toEqual(["/invocationId"])
    })
  )

  it.scopedLive("refuses missing, malformed and invalid tokens before any RPC runs", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const now = Math.floor(Date.now() / 1000)
      const who = { sub: "alice", org: "acme" }
      const db = `${front.base}/db`
      const otherKey = (yield* Effect.promise(() => generateKeyPair("ES256"))).privateKey
      const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
      const attacks: Record<string, string> = {
        "alg none": `${encode({ alg: "none", typ: "JWT" })}.${encode({ sub: "alice", org: "acme", iss: front.signer.issuer, aud: db, exp: now + 300 })}.`,
        "HMAC keyed with the public key": yield* Effect.promise(() =>
          new SignJWT({ org: "acme" })
            .setProtectedHeader({ alg: "HS256" })
            .setSubject("alice")
            .setIssuer(front.signer.issuer)
            .setAudience(db)
            .setExpirationTime(now + 300)
            .sign(new TextEncoder().encode(JSON.stringify(front.signer.publicJwk)))
        ),
        "wrong key": yield* mint(front.signer, db, who, { key: otherKey }),
        "wrong audience (the MCP resource)": yield* mint(front.signer, `${front.base}/mcp`, who),
        "wrong issuer": yield* mint(front.signer, db, who, { issuer: "http://127.0.0.1:1/evil" }),
        expired: yield* mint(front.signer, db, who, { exp: now - 600 }),
        "not yet valid": yield* mint(front.signer, db, who, { extra: { nbf: now + 600 } }),
        "missing org claim": yield* mint(front.signer, db, { sub: "alice" }),
        garbage: "not-a-jwt"
      }
      for (const [name, token] of Object.entries(attacks)) {
        const answer = yield* post(front, browse, bearer(token))
        expect(answer.status, name).toBe(401)
        const challenge = answer.headers.get("www-authenticate") ?? ""
        expect(challenge, name).toMatch(/^Bearer realm="cairn", error="invalid_token", error_description="[^"]+"$/)
        const body = JSON.parse(answer.text)
        expect(body.error, name).toBe("invalid_token")
        expect(body.requestId, name).toBe(answer.headers.get("x-request-id"))
        // The header carries the same description, with quotes made header-safe.
        expect(challenge, name).toContain(`error_description="${body.message.replace(/"/g, "'")}"`)
        expect(answer.text, name).not.toContain("Exit")
      }

      const missing = yield* post(front, browse)
      expect(missing.status).toBe(401)
      expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="cairn"')
      expect(JSON.parse(missing.text)).toMatchObject({ error: "invalid_token", message: expect.stringContaining("bearer access token is required") })

      const malformed = yield* post(front, browse, { authorization: "Basic YWxpY2U6c2VjcmV0" })
      // Not a bearer token at all: a challenge (401), as on /mcp.
      expect(malformed.status).toBe(401)
      expect(malformed.headers.get("www-authenticate")).toMatch(/^Bearer realm="cairn", error="invalid_request"/)
    })
  )

  it.scopedLive("answers a writer overload with 503 and Retry-After, and nothing else of the RPC", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const answer = yield* post(front, mutate("overload", "0190a5b0-0000-7000-8000-000000000005"), bearer(token))
      expect(answer.status).toBe(503)
      expect(answer.headers.get("retry-after")).toBe("3")
      expect(JSON.parse(answer.text)).toEqual({
        error: "overloaded",
        message: "The database is busy. Nothing was applied; retry after 3 s with the same invocationId.",
        requestId: answer.headers.get("x-request-id"),
        retryAfterSeconds: 3
      })
    })
  )

  it.scopedLive("replaces a defect by a generic message naming the request id; the details stay in the log", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const answer = yield* post(front, mutate("boom", "0190a5b0-0000-7000-8000-000000000003"), bearer(token))
      const requestId = answer.headers.get("x-request-id")!
      expect(exitOf(answer.text)).toEqual({
        _tag: "Failure",
        cause: {
          _tag: "Die",
          defect: `The server failed while handling this request; it was logged as ${requestId}. Retry later, or report that reference.`
        }
      })
      expect(answer.text).not.toContain("internal_table")
      const logged = front.logs().filter((line) => line.includes(`requestId=${requestId}`))
      expect(logged.some((line) => line.includes("level=ERROR") && line.includes(secretDefect))).toBe(true)

      // The engine's InternalError already names its logged reference: it passes through as is.
      const internal = yield* post(front, mutate("internal", "0190a5b0-0000-7000-8000-000000000004"), bearer(token))
      expect(exitOf(internal.text).cause).toEqual({ _tag: "Die", defect: InternalError.withReference("ref-1234").message })
    })
  )

  it.scopedLive("answers the protocol's other messages as @effect/rpc's server does (a ping, an end of input); an unknown RPC is the gate's plain 400", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const ping = yield* post(front, JSON.stringify({ _tag: "Ping" }), bearer(token))
      expect({ status: ping.status, body: JSON.parse(ping.text) }).toEqual({ status: 200, body: [{ _tag: "Pong" }] })
      for (const message of [{ _tag: "Eof" }, { _tag: "Ack", requestId: "7" }, { _tag: "Interrupt", requestId: "7" }]) {
        const answer = yield* post(front, JSON.stringify(message), bearer(token))
        expect({ status: answer.status, body: JSON.parse(answer.text) }).toEqual({ status: 200, body: [] })
      }
      const unknown = yield* post(front, request("Drop", {}), bearer(token))
      expect(unknown.status).toBe(400)
      expect(JSON.parse(unknown.text)).toMatchObject({ error: "invalid_request" })
      expect(unknown.text).not.toContain("Defect")
    })
  )
})

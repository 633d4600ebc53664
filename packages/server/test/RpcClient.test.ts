// CairnClient and the generated tracker bindings against a real front: typed results, the
// eight public errors as domain classes, every front refusal as a typed TransportError
// (never a defect), UUIDv7 invocation ids, and query documents built from typed arguments.
import { CairnClient } from "@cairn/client/CairnClient"
import { PayloadTooLarge, RequestTimeout, ServerFailure, Unauthenticated } from "@cairn/client/TransportError"
import { tracker } from "@cairn/client/generated/tracker"
import { Inaccessible, InvalidQuery } from "@cairn/domain/PublicError"
import { Overloaded } from "@cairn/domain/Overloaded"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type Front, mint, secretDefect, startFront } from "./FrontStack.js"

const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const clientFor = (front: Front, token: string | Effect.Effect<string>) => CairnClient.layerFetch({ baseUrl: front.base, token })

const withClient = <A, E>(front: Front, token: string | Effect.Effect<string>, effect: Effect.Effect<A, E, CairnClient>) =>
  Effect.provide(effect, clientFor(front, token))

const taskOp = (name: string) => ({ kind: "operation" as const, owner: { kind: "entity" as const, name: "Task" }, name })

describe("CairnClient", () => {
  it.scopedLive("returns typed results and the public errors as domain classes", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      yield* withClient(
        front,
        token,
        Effect.gen(function* () {
          const client = yield* CairnClient
          const described = yield* client.describe({ inspect: [{ kind: "entity", name: "Task" }] })
          expect(described.definitions?.[0]?.ref).toEqual({ kind: "entity", name: "Task" })
          const invalid = yield* Effect.flip(client.query({ query: { version: 1, from: { kind: "entity", name: "Nope" }, select: {} } }))
          expect(invalid).toBeInstanceOf(InvalidQuery)
          const hidden = yield* Effect.flip(
            client.mutate({ operation: taskOp("complete"), target: { kind: "entity", entity: "Task", id: "hidden" }, invocationId: "0190a5b0-0000-7000-8000-00000000000a" })
          )
          expect(hidden).toBeInstanceOf(Inaccessible)
          expect(hidden.message).toBe("That target cannot be revealed.")
        })
      )
    })
  )

  it.scopedLive("turns every front refusal into a typed TransportError", () =>
    Effect.gen(function* () {
      const front = yield* startFront({ limits: { maxBodyBytes: 2048, requestTimeoutMs: 300 } })
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const mcpToken = yield* mint(front.signer, `${front.base}/mcp`, { sub: "alice", org: "acme" })

      const refused = yield* withClient(front, mcpToken, Effect.flip(Effect.flatMap(CairnClient, (c) => c.describe({ search: "task" }))))
      expect(refused).toBeInstanceOf(Unauthenticated)
      expect(refused.message).toBe("The access token was issued for a different resource.")

      yield* withClient(
        front,
        token,
        Effect.gen(function* () {
          const client = yield* CairnClient
          const complete = (id: string, invocationId: string, input?: unknown) =>
            Effect.flip(client.mutate({ operation: taskOp("complete"), target: { kind: "entity", entity: "Task", id }, invocationId, ...(input !== undefined ? { input } : {}) }))

          const tooLarge = yield* complete("t1", "0190a5b0-0000-7000-8000-00000000000b", { note: "x".repeat(4096) })
          expect(tooLarge).toBeInstanceOf(PayloadTooLarge)
          expect((tooLarge as PayloadTooLarge).limitBytes).toBe(2048)

          const overloaded = yield* complete("overload", "0190a5b0-0000-7000-8000-000000000007")
          expect(overloaded).toBeInstanceOf(Overloaded)
          expect((overloaded as Overloaded).retryAfterSeconds).toBe(3)

          const failed = yield* complete("boom", "0190a5b0-0000-7000-8000-00000000000c")
          expect(failed).toBeInstanceOf(ServerFailure)
          expect(failed.message).toMatch(/^The server failed while handling this request; it was logged as [A-Za-z0-9_-]{16}\./)
          expect(failed.message).not.toContain(secretDefect)

          const slow = yield* Effect.flip(client.query({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: {}, page: { first: 999 } } }))
          expect(slow).toBeInstanceOf(RequestTimeout)
          expect((slow as RequestTimeout).requestId).toMatch(/^[A-Za-z0-9_-]{16}$/)
        })
      )
    })
  )

  it.scopedLive("asks a token effect for the current token on every request", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const tokens = [yield* front.token({ sub: "alice", org: "acme" }), yield* front.token({ sub: "bob", org: "acme" })]
      let calls = 0
      const current = Effect.sync(() => tokens[Math.min(calls++, 1)]!)
      const subjects = yield* withClient(
        front,
        current,
        Effect.forEach([1, 2], () =>
          Effect.map(
            Effect.flatMap(CairnClient, (c) => c.query({ query: { version: 1, from: { kind: "entity", name: "Task" }, select: {} } })),
            (result) => result.rows[0]!["subject"]
          )
        )
      )
      expect(subjects).toEqual(["alice", "bob"])
    })
  )
})

describe("generated bindings", () => {
  it.scopedLive("call operations with typed arguments and fresh UUIDv7 invocation ids", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      yield* withClient(
        front,
        token,
        Effect.gen(function* () {
          const first = yield* tracker.Task.complete({ target: "t1" })
          const second = yield* tracker.Task.complete({ target: "t1" })
          expect(first.invocationId).toMatch(uuidV7)
          expect(second.invocationId > first.invocationId).toBe(true)
          expect(first).toMatchObject({ operation: taskOp("complete"), target: { kind: "entity", entity: "Task", id: "t1" }, outcome: "committed" })
          expect(first.output).toEqual({ echoedInput: {} })

          const named = yield* tracker.Task.rename({ target: "t2", input: { title: "Ship it" }, invocationId: "0190a5b0-0000-7000-8000-00000000000d" })
          expect(named.invocationId).toBe("0190a5b0-0000-7000-8000-00000000000d")
          expect(named.output).toEqual({ echoedInput: { title: "Ship it" } })

          const created = yield* tracker.Task.create({ input: { projectId: "p1", title: "Write tests", priority: 2 } })
          expect(created.target).toBeUndefined()
          expect(created.operation).toEqual(taskOp("create"))

          const hidden = yield* Effect.flip(tracker.Project.archive({ target: "hidden" }))
          expect(hidden).toBeInstanceOf(Inaccessible)
        })
      )
    })
  )

  it.scopedLive("build the exact QueryDocumentV1 from typed query arguments", () =>
    Effect.gen(function* () {
      const front = yield* startFront()
      const token = yield* front.token({ sub: "alice", org: "acme" })
      const result = yield* withClient(
        front,
        token,
        tracker.Task.query({
          select: { title: { path: ["title"] }, project: { path: ["project", "name"] } },
          where: { op: "and", filters: [{ op: "eq", path: ["status"], value: "open" }, { op: "in", path: ["priority"], value: [1, 2] }] },
          order: [{ path: ["dueDate"], direction: "desc" }],
          page: { first: 5, after: "cursor-1" },
          ifCatalog: "token-1"
        })
      )
      expect((result.rows[0] as unknown as { request: unknown }).request).toEqual({
        ifCatalog: "token-1",
        query: {
          version: 1,
          from: { kind: "entity", name: "Task" },
          select: { title: { path: ["title"] }, project: { path: ["project", "name"] } },
          where: { op: "and", filters: [{ op: "eq", path: ["status"], value: "open" }, { op: "in", path: ["priority"], value: [1, 2] }] },
          order: [{ path: ["dueDate"], direction: "desc" }],
          page: { first: 5, after: "cursor-1" }
        }
      })
    })
  )
})

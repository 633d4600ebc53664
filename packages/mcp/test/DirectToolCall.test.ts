// A tool call answered on the request's fiber against the SDK server it stands in for:
// which requests it takes (exactly those the server would hand to its tools/call handler,
// with the same arguments). Its answers' text is tested in ToolCallAnswer.test.ts.
import { RELATED_TASK_META_KEY } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Effect } from "effect"
import { success } from "@cairn/mcp/CallTool"
import { directToolCall, plainToolCall } from "@cairn/mcp/DirectToolCall"
import { directRequest } from "@cairn/mcp/DirectTransport"
import { headers, viaSdk } from "./support/viaSdk.js"

const call = (params: unknown, id: string | number = 7) => ({ jsonrpc: "2.0", id, method: "tools/call", params })

describe("directToolCall", () => {
  it.effect("takes exactly the calls the SDK server hands to its handler, with the arguments it hands over", () =>
    Effect.promise(async () => {
      const messages = [
        call({ name: "query", arguments: { query: { version: 1 }, n: [1, { a: null }] } }),
        call({ name: "describe" }, "x-1"),
        call({ name: "mutate", arguments: {}, _meta: { progressToken: 3 } }),
        call({ name: "query", arguments: {}, _meta: { [RELATED_TASK_META_KEY]: { taskId: "t" } } }),
        call({ name: "query", extra: true, arguments: {} }),
        // The SDK refuses these before the handler, or the handler refuses them (an unknown tool).
        call({ name: "query", arguments: {}, task: { ttl: 1000 } }),
        call({ name: 3, arguments: {} }),
        call({ arguments: {} }),
        call({ name: "query", arguments: { [Symbol.iterator]: 1 } }),
        call({ name: "nope", arguments: {} }),
        { jsonrpc: "2.0", id: 8, method: "tools/list", params: {} },
        { jsonrpc: "2.0", id: 9, method: "ping" }
      ]
      const taken: Array<unknown> = []
      for (const message of messages) {
        const request = directRequest(headers, message)
        if (request === undefined) continue
        const direct = directToolCall(request)
        const sdk = await viaSdk(message, success({}))
        if (direct === undefined) {
          // Not handed to a tool: the server answers without the handler, or the handler refuses an unknown name.
          assert.isTrue(sdk.seen.length === 0 || (sdk.seen[0] as { name: unknown }).name === "nope", JSON.stringify(message))
        } else {
          assert.deepStrictEqual(sdk.seen, [{ name: direct.name, arguments: direct.arguments }], JSON.stringify(message))
          assert.strictEqual(direct.id, message.id)
          taken.push(message.id)
        }
      }
      assert.deepStrictEqual(taken, [7, "x-1", 7, 7, 7])
    })
  )
})

describe("plainToolCall", () => {
  it("takes the plain call, exactly as the schemas would", () => {
    assert.deepStrictEqual(plainToolCall(call({ name: "query", arguments: { q: 1 } })), { id: 7, name: "query", arguments: { q: 1 } })
    assert.deepStrictEqual(plainToolCall(call({ name: "describe" }, "x")), { id: "x", name: "describe", arguments: undefined })
  })

  // Messages as JSON.parse makes them, near the plain call and past its edges.
  const value = fc.oneof(
    fc.constantFrom<unknown>("2.0", "1.0", "tools/call", "tools/list", "query", "describe", "mutate", "nope", 0, -0, 7, 1.5, 2 ** 53, -3, null, true, [], "x"),
    fc.jsonValue({ maxDepth: 2 })
  )
  const absent = Symbol("absent")
  /** `usual` mostly, sometimes any value, sometimes no key at all. */
  const field = <A>(usual: fc.Arbitrary<A>, present = 8) =>
    fc.oneof({ arbitrary: usual, weight: present }, { arbitrary: value, weight: 1 }, { arbitrary: fc.constant(absent), weight: 1 })
  const rare = fc.oneof({ arbitrary: fc.constant(absent), weight: 12 }, { arbitrary: value, weight: 1 })
  const object = (fields: Record<string, fc.Arbitrary<unknown>>) =>
    fc.record(fields).map((o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== absent)))
  const meta = fc.oneof(
    { arbitrary: fc.constant(absent), weight: 12 },
    { arbitrary: fc.constantFrom<unknown>({ progressToken: 1 }, { progressToken: 1.5 }, { "io.modelcontextprotocol/related-task": { taskId: "t" } }), weight: 1 },
    { arbitrary: value, weight: 1 }
  )
  const args = fc.dictionary(fc.constantFrom("query", "a", "__proto__", "0", "constructor"), value, { maxKeys: 3 })
  const params = object({
    name: field(fc.constantFrom("query", "describe", "mutate", "nope")),
    arguments: field(args, 6),
    _meta: meta,
    task: fc.oneof({ arbitrary: fc.constant(absent), weight: 12 }, { arbitrary: fc.constantFrom<unknown>({ ttl: 5 }, {}), weight: 1 }),
    extra: rare
  })
  const message = object({
    jsonrpc: field(fc.constant("2.0")),
    id: field(fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constantFrom(-0, 2 ** 53, 2 ** 53 - 1, 1.5))),
    method: field(fc.constant("tools/call")),
    params: field(params),
    extra: rare
  })

  it("takes a message only when the SDK's schemas take it, with the same id, tool and arguments", () => {
    let taken = 0
    fc.assert(
      fc.property(message, (generated) => {
        // Through JSON text, as requests arrive (an own "__proto__" key survives only this way).
        const text = JSON.stringify(generated)
        const parsed: unknown = JSON.parse(text)
        const plain = plainToolCall(parsed)
        if (plain === undefined) return
        taken++
        const request = directRequest(headers, JSON.parse(text))
        assert.isDefined(request, text)
        assert.deepStrictEqual(directToolCall(request!), plain, text)
      }),
      { numRuns: 3000 }
    )
    // About a tenth of the messages are plain calls (the property is not vacuous).
    assert.isAbove(taken, 100)
  })
})

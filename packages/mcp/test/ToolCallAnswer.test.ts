// The wire text of a tools/call answer against the SDK server it stands in for: every
// outcome (a result `success` made, a public error result, a thrown protocol error, a result
// the SDK refuses) is answered with exactly the body the server sends, for generated values
// too; a successful result's value is serialized once.
import { type CallToolResult, CallToolResultSchema, ErrorCode } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Effect } from "effect"
import { failure, success } from "@cairn/mcp/CallTool"
import { answerText, ProtocolError } from "@cairn/mcp/ToolCallAnswer"
import { InvalidInput, InvalidQuery, QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { viaSdk } from "./support/viaSdk.js"

const call = (params: unknown, id: string | number = 7) => ({ jsonrpc: "2.0", id, method: "tools/call", params })

const plain = { rows: [{ id: "a", title: 'quote " backslash \\ newline \n unicode é \u2028' }], cursor: null }

describe("answerText", () => {
  it.effect("writes every outcome exactly as the SDK server sends it", () =>
    Effect.promise(async () => {
      const nullProto = Object.assign(Object.create(null) as object, { a: 1 })
      const hidden = Object.defineProperty({ shown: 1 }, "hidden", { value: 2, enumerable: false })
      const withToJson = { toJSON: () => ({ other: true }), n: 1 }
      class Page {
        constructor(readonly rows: Array<number>) {}
      }
      const answers: Array<CallToolResult | ProtocolError> = [
        success(plain),
        success({ items: [], pageInfo: { hasNextPage: false } }),
        success({}),
        success(nullProto),
        success(hidden),
        success(withToJson),
        success(new Page([1])),
        success(JSON.parse('{"__proto__": {"x": 1}, "y": 2}') as object),
        failure(new InvalidQuery({ message: "bad", issues: [] })),
        { content: "not a list" } as never,
        { content: [{ type: "text", text: "made elsewhere" }], structuredContent: { a: 1 } },
        new ProtocolError(ErrorCode.InternalError, "boom"),
        new ProtocolError(-32005, "Overloaded. Retry.", { retryAfterSeconds: 1 })
      ]
      for (const answer of answers) {
        for (const id of [7, "x-1"]) {
          const message = call({ name: "query", arguments: {} }, id)
          const sdk = await viaSdk(message, answer)
          assert.strictEqual(answerText(id, answer), sdk.text, sdk.text)
        }
      }
    })
  )

  it("serializes a successful result's value once", () => {
    let serialized = 0
    // Counts how often the value is serialized.
    const counted = { toJSON: () => (serialized++, { n: 1 }) }
    const text = answerText(1, success({ ...plain, counted }))
    assert.strictEqual(serialized, 1)
    assert.deepStrictEqual(JSON.parse(text).result.structuredContent, { ...plain, counted: { n: 1 } })
  })
})

describe("answerText, generated", () => {
  const id = fc.oneof(fc.string({ maxLength: 8 }), fc.maxSafeInteger())
  // Values as the engine's answers are: JSON objects (records, pages, receipts).
  const value = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 })
  const issue = fc.record({ path: fc.string({ maxLength: 10 }), message: fc.string({ maxLength: 20 }) })
  const publicError = fc.oneof(
    fc.record({ message: fc.string(), issues: fc.option(fc.array(issue, { maxLength: 3 }), { nil: undefined }) }).map((f) =>
      f.issues === undefined ? new InvalidQuery({ message: f.message }) : new InvalidInput({ message: f.message, issues: f.issues })
    ),
    fc.record({ message: fc.string(), limit: fc.string({ maxLength: 12 }) }).map((f) => new QueryBudgetExceeded(f))
  )
  const protocolError = fc
    .record({ code: fc.oneof(fc.integer({ min: -32768, max: -32000 }), fc.double()), message: fc.string(), data: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }) })
    .map((f) => new ProtocolError(f.code, f.message, f.data))
  const answer: fc.Arbitrary<CallToolResult | ProtocolError> = fc.oneof(value.map(success), publicError.map(failure), protocolError)

  it("parses to exactly the SDK schema's encoding of the result", () =>
    fc.assert(
      fc.property(id, value, (id, value) => {
        const result = success(value)
        const expected = JSON.parse(JSON.stringify({ result: CallToolResultSchema.parse(result), jsonrpc: "2.0", id }))
        assert.deepStrictEqual(JSON.parse(answerText(id, result)), expected)
      }),
      { numRuns: 500 }
    ))

  it.effect("is, byte for byte, what a pooled SDK server sends", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(id, answer, async (id, answer) => {
          const sdk = await viaSdk(call({ name: "query", arguments: {} }, id), answer)
          assert.strictEqual(answerText(id, answer), sdk.text)
        }),
        { numRuns: 200 }
      )
    )
  )
})

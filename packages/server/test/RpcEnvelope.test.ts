// The `/db` gate's envelope check hands its parse to the RPC layer (`ParsedEnvelope`) instead of
// the serialization parsing the body again: for every body it accepts, its messages must be
// exactly what the serialization's own `decode` gives (one message per body, in either framing).
import { RpcSerialization } from "@effect/rpc"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { type Framing, readEnvelope } from "@cairn/server/http/RpcEnvelope"

const decoderOf = (framing: Framing) =>
  Effect.runSync(
    Effect.map(RpcSerialization.RpcSerialization, (s) => s.unsafeMake()).pipe(
      Effect.provide(framing === "json" ? RpcSerialization.layerJson : RpcSerialization.layerNdjson)
    )
  )

const headers = fc.array(fc.tuple(fc.string(), fc.string()), { maxLength: 4 })
const message = fc.oneof(
  fc.record({
    _tag: fc.constant("Request"),
    id: fc.bigInt({ min: 0n, max: 10n ** 19n }).map(String),
    tag: fc.constantFrom("Query", "Mutate", "Describe", "Changes"),
    payload: fc.jsonValue(),
    headers
  }),
  fc.record({ _tag: fc.constantFrom("Ack", "Interrupt"), requestId: fc.nat().map(String) }),
  fc.record({ _tag: fc.constantFrom("Ping", "Eof") })
)

describe("readEnvelope", () => {
  it("gives, for a JSON body it accepts, the message the JSON serialization decodes", () => {
    fc.assert(
      fc.property(message, (m) => {
        const body = JSON.stringify(m)
        const envelope = readEnvelope(body, "json")
        expect(envelope.problem).toBeUndefined()
        expect(envelope.messages).toStrictEqual(decoderOf("json").decode(body))
      })
    )
  })

  it("gives, for an NDJSON body it accepts, the message the NDJSON serialization decodes", () => {
    fc.assert(
      fc.property(message, (m) => {
        const body = `${JSON.stringify(m)}\n`
        const envelope = readEnvelope(body, "ndjson")
        expect(envelope.problem).toBeUndefined()
        expect(envelope.messages).toStrictEqual(decoderOf("ndjson").decode(body))
      })
    )
  })

  it("gives no messages for a body it refuses, only what is wrong", () => {
    for (const [body, framing] of [
      ["{", "json"],
      ["[]", "json"],
      ['{"_tag":"Request","id":"x","tag":"Query","payload":{},"headers":[]}', "json"],
      ['{"_tag":"Ping"}', "ndjson"],
      ['{"_tag":"Ping"}\n{\n', "ndjson"],
      // One message per body: a second line would be a second call in the same request.
      ['{"_tag":"Ping"}\n{"_tag":"Ping"}\n', "ndjson"],
      ['{"_tag":"Request","id":"1","tag":"SyncSnapshot","payload":{},"headers":[]}\n{"_tag":"Request","id":"2","tag":"SyncSnapshot","payload":{},"headers":[]}\n', "ndjson"],
      ['{"_tag":"Ping"}\n\n', "ndjson"]
    ] as const) {
      const envelope = readEnvelope(body, framing)
      expect(envelope.messages).toBeUndefined()
      expect(envelope.problem).toMatch(/request body/)
    }
  })
})

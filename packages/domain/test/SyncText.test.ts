// The sync wire text against the schema as the oracle: for random batches (odd strings,
// nested record values, shared change objects), `syncBatchJson` over `syncChangesJson` and
// `syncCheckpointJson` writes exactly the text of `JSON.stringify(Schema.encodeSync(SyncBatch)(batch))`,
// and that text decodes back to the batch.
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import fc from "fast-check"
import { SyncBatch, SyncChange, syncBatchJson, syncChangesJson, syncCheckpointJson } from "@cairn/domain/Sync"

const text = fc.string({ unit: "binary" })
const name = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,20}$/)
// Records come from stored JSON text, so they are what JSON can carry (no -0: JSON writes it as 0).
const record = fc.dictionary(text, fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown), { maxKeys: 6 })
const change: fc.Arbitrary<SyncChange> = fc.oneof(
  fc.record({ _tag: fc.constant("Upsert" as const), entity: name, id: text, record }),
  fc.record({ _tag: fc.constant("Remove" as const), entity: name, id: text })
)
const checkpoint = fc.record({ cursor: text, subject: text, database: text, catalogToken: text, position: text })
const batch: fc.Arbitrary<SyncBatch> = fc
  .record({ changes: fc.array(change, { maxLength: 8 }), checkpoint })
  // Repeats of one change object, as streams that see a record alike share it (and its memoised text).
  .map(({ changes, checkpoint }) => ({ _tag: "SyncBatch" as const, changes: changes.length > 1 ? [...changes, changes[0]!] : changes, checkpoint }))

const encode = Schema.encodeSync(SyncBatch)
const decode = Schema.decodeUnknownSync(SyncBatch)
const wire = (b: SyncBatch) => syncBatchJson(syncChangesJson(b.changes), syncCheckpointJson(b.checkpoint)(b.checkpoint.cursor, b.checkpoint.position))

describe("sync wire text", () => {
  it("is the schema's encoding, byte for byte", () =>
    fc.assert(
      fc.property(batch, (b) => {
        const written = wire(b)
        assert.strictEqual(written, JSON.stringify(encode(b)))
        assert.deepStrictEqual(JSON.parse(written), encode(b))
        assert.deepStrictEqual(decode(JSON.parse(written)), decode(encode(b)))
      }),
      { numRuns: 500 }
    ))

  it("writes a change object shared by batches alike in each", () => {
    const shared: SyncChange = { _tag: "Upsert", entity: "Task", id: "t1", record: { title: "a \"quoted\" \u2028 title" } }
    const one = syncChangesJson([shared])
    const two = syncChangesJson([shared, shared])
    assert.strictEqual(two, `[${one.slice(1, -1)},${one.slice(1, -1)}]`)
    assert.strictEqual(two, JSON.stringify(Schema.encodeSync(Schema.Array(SyncChange))([shared, shared])))
  })
})

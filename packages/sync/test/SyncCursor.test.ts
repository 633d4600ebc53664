import { assert, describe, it } from "@effect/vitest"
import { Sealer } from "@cairn/catalog/Sealer"
import { SyncCheckpoint } from "@cairn/domain/Sync"
import { Redacted, Schema } from "effect"
import * as SyncCursor from "../src/SyncCursor.js"

const sealer = Sealer.make(Redacted.make("cursor-test-secret-0123456789abcdef"))
const other = Sealer.make(Redacted.make("another-secret-0123456789abcdef0123"))
const binding: SyncCursor.Binding = { subject: "alice", database: "db", scope: "scope", access: "access", catalogToken: "token" }

describe("sync cursors", () => {
  it("a stream's cheap cursors open to their binding and position; fully sealed ones still open", () => {
    const at = SyncCursor.checkpointer(sealer, binding)
    for (const position of [0, 1, 35, 36, 1_000_000_007]) {
      const checkpoint = at(position)
      assert.deepStrictEqual(SyncCursor.openCursor(sealer, checkpoint.cursor), { ...binding, position })
    }
    assert.deepStrictEqual(SyncCursor.openCursor(sealer, SyncCursor.sealCursor(sealer, { ...binding, position: 7 })), { ...binding, position: 7 })
  })

  it("a cheap cursor with another position, MAC or seal, or under another secret, does not open", () => {
    const at = SyncCursor.checkpointer(sealer, binding)
    const [seal, position, mac] = at(41).cursor.split(".") as [string, string, string]
    const theirs = SyncCursor.checkpointer(sealer, { ...binding, subject: "mallory" })(41).cursor.split(".")
    for (const forged of [
      `${seal}.${(42).toString(36)}.${mac}`,
      `${seal}.${position}.${theirs[2]}`,
      `${theirs[0]}.${position}.${mac}`,
      `${seal}.${position}`,
      `${seal}.${position}.${mac}.x`,
      `${seal}..${mac}`,
      seal
    ]) {
      assert.isUndefined(SyncCursor.openCursor(sealer, forged), forged)
    }
    assert.isUndefined(SyncCursor.openCursor(other, at(41).cursor))
  })

  it("a stream's checkpoint text is exactly the encoded checkpoint, and its cursor opens", () => {
    const checkpoints = SyncCursor.streamCheckpoints(sealer, { ...binding, subject: 'al"ice\u2028', catalogToken: "t\\k" })
    for (const position of [0, 1, 36, 1_000_000_007, Number.MAX_SAFE_INTEGER]) {
      const text = checkpoints.json(position)
      assert.strictEqual(text, JSON.stringify(Schema.encodeSync(SyncCheckpoint)(checkpoints.at(position))))
      const cursor = SyncCursor.openCursor(sealer, JSON.parse(text).cursor)
      assert.strictEqual(cursor?.position, position)
      assert.strictEqual(cursor?.subject, 'al"ice\u2028')
    }
  })
})

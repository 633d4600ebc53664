// Record ids from the pooled source: UUIDv7, and strictly increasing within the process
// (records created later sort later by id, as with `uuid`'s own v7), also within one millisecond.
import { assert, describe, it } from "@effect/vitest"
import { newId } from "../src/internal/ids.js"

const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("record ids", () => {
  it("are UUIDv7, unique and strictly increasing across pool refills", () => {
    const ids = Array.from({ length: 10_000 }, newId)
    for (const id of ids) assert.match(id, uuidV7)
    for (let i = 1; i < ids.length; i++) assert.isTrue(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]}`)
    assert.strictEqual(new Set(ids).size, ids.length)
    // The time prefix is the creation time.
    const millis = parseInt(ids[0]!.replace(/-/g, "").slice(0, 12), 16)
    assert.isTrue(Math.abs(millis - Date.now()) < 60_000)
  })
})

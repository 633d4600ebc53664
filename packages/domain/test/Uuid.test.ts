// Ids from the pooled source: UUIDv7 as the `uuid` package reads them, unique, and strictly
// increasing within the process (also within one millisecond and across pool refills).
import { assert, describe, it } from "@effect/vitest"
import { validate, version } from "uuid"
import { uuidV7 } from "@cairn/domain/Uuid"

describe("uuidV7", () => {
  it("makes valid, unique, increasing UUIDv7 with the creation time as prefix", () => {
    const before = Date.now()
    const ids = Array.from({ length: 10_000 }, uuidV7)
    for (const id of ids) {
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      assert.isTrue(validate(id) && version(id) === 7, id)
    }
    for (let i = 1; i < ids.length; i++) assert.isTrue(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]}`)
    assert.strictEqual(new Set(ids).size, ids.length)
    const millis = parseInt(ids[0]!.replace(/-/g, "").slice(0, 12), 16)
    assert.isTrue(millis >= before && millis <= Date.now() + 1)
  })
})

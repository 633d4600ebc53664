/**
 * Record ids: UUIDv7 from a pooled random source. `uuid`'s own source asks WebCrypto for 16
 * bytes per id (a few microseconds each on the writer's hot path); one `randomFillSync` of a
 * 4 KiB pool serves 256 ids.
 */
import { randomFillSync } from "node:crypto"
import { v7 as uuidv7 } from "uuid"

const pool = new Uint8Array(4096)
let offset = pool.length
/** Monotonic within the process, as `uuid`'s own v7 state: ids made later sort later. */
let lastMillis = -Infinity
let seq = 0

/** A new UUIDv7 (time-ordered and monotonic in this process, the rest random). */
export const newId = (): string => {
  if (offset + 16 > pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const random = pool.subarray(offset, offset + 16)
  offset += 16
  const now = Date.now()
  if (now > lastMillis) {
    seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!
    lastMillis = now
  } else {
    seq = (seq + 1) | 0
    if (seq === 0) lastMillis += 1
  }
  return uuidv7({ random, msecs: lastMillis, seq })
}

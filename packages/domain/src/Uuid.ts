/**
 * UUIDv7 ids (RFC 9562: a millisecond time prefix, then randomness) from a pooled random source:
 * asking WebCrypto for 16 bytes per id costs a few microseconds each (the writer's records, a
 * client's invocation ids); one `getRandomValues` of a 4 KiB pool serves 256 ids. Monotonic
 * within the process, as `uuid`'s own v7 (the same layout: a 31-bit counter seeded at random
 * each millisecond, in the bits after the version), so ids made later sort later.
 */
const pool = new Uint8Array(4096)
let offset = pool.length
let lastMillis = -Infinity
let seq = 0

const hex = Array.from({ length: 256 }, (_, i) => (i + 0x100).toString(16).slice(1))

/** A new UUIDv7 (lowercase), later than every one made before in this process. */
export const uuidV7 = (): string => {
  if (offset + 16 > pool.length) {
    globalThis.crypto.getRandomValues(pool)
    offset = 0
  }
  const r = offset
  offset += 16
  const now = Date.now()
  if (now > lastMillis) {
    seq = ((pool[r + 6]! & 0x7f) << 24) | (pool[r + 7]! << 16) | (pool[r + 8]! << 8) | pool[r + 9]!
    lastMillis = now
  } else {
    seq = (seq + 1) | 0
    if (seq === 0) lastMillis += 1
  }
  const ms = lastMillis
  return (
    hex[(ms / 0x10000000000) & 0xff]! +
    hex[(ms / 0x100000000) & 0xff]! +
    hex[(ms / 0x1000000) & 0xff]! +
    hex[(ms / 0x10000) & 0xff]! +
    "-" +
    hex[(ms / 0x100) & 0xff]! +
    hex[ms & 0xff]! +
    "-" +
    hex[0x70 | ((seq >>> 28) & 0x0f)]! +
    hex[(seq >>> 20) & 0xff]! +
    "-" +
    hex[0x80 | ((seq >>> 14) & 0x3f)]! +
    hex[(seq >>> 6) & 0xff]! +
    "-" +
    hex[((seq << 2) & 0xff) | (pool[r + 10]! & 0x03)]! +
    hex[pool[r + 11]!]! +
    hex[pool[r + 12]!]! +
    hex[pool[r + 13]!]! +
    hex[pool[r + 14]!]! +
    hex[pool[r + 15]!]!
  )
}

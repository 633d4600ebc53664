/**
 * Parses untrusted JSON text only when its shape stays within bounds, so a small body
 * cannot make later work (schema decoding, issue formatting, recursion) large. One
 * linear pass over the text checks the syntax and the bounds before `JSON.parse` runs.
 */
import { Data, Either, Option } from "effect"

/** Limits on the shape of a JSON document. String lengths are UTF-16 code units, as `String.length`. */
export interface JsonBounds {
  /** Most containers (arrays and objects) open at once; a top-level scalar has depth 0. */
  readonly maxDepth: number
  /** Most elements in one array. */
  readonly maxArrayLength: number
  /** Most members in one object (repeated keys count each time). */
  readonly maxObjectKeys: number
  /** Longest string value or key, after unescaping. */
  readonly maxStringLength: number
  /** Most values in the whole document (every scalar and container; keys are not values). */
  readonly maxNodes: number
}

/**
 * Why these defaults: no request of the contract nests anywhere near 64 levels (a filter
 * tree is capped far lower by the query budget), yet 64 is shallow enough for every
 * recursive decoder; 10,000 array elements and 1,000 keys exceed any sensible `select`,
 * `inspect` list or operation input while keeping a failing decode's work small; 64 Ki
 * characters holds any text field a caller should send inline; and 100,000 values bounds
 * the schema work of one request to well under a second even when every value fails.
 */
export const defaultJsonBounds: JsonBounds = {
  maxDepth: 64,
  maxArrayLength: 10_000,
  maxObjectKeys: 1_000,
  maxStringLength: 65_536,
  maxNodes: 100_000
}

/**
 * Which bound a refused document exceeded (`syntax`: not JSON at all, `prototypeKey`: a
 * `__proto__` key, `loneSurrogate`: a string that is not well-formed Unicode, refused by
 * `check` only).
 */
export type JsonRefusalBound = keyof JsonBounds | "syntax" | "prototypeKey" | "loneSurrogate"

/**
 * The document was not parsed. `reason` is one short sentence a caller can act on; it
 * names the bound and never repeats any part of the input.
 */
export class JsonRefusal extends Data.TaggedError("JsonRefusal")<{
  readonly bound: JsonRefusalBound
  readonly reason: string
}> {}

const refuse = (bound: JsonRefusalBound, limits: JsonBounds): JsonRefusal => refusal(bound, limits, "request body")

const refusal = (bound: JsonRefusalBound, limits: JsonBounds, what: string): JsonRefusal => {
  switch (bound) {
    case "maxDepth":
      return new JsonRefusal({ bound, reason: `The ${what} nests deeper than ${limits.maxDepth} levels; flatten it.` })
    case "maxArrayLength":
      return new JsonRefusal({ bound, reason: `An array in the ${what} has more than ${limits.maxArrayLength} elements; send fewer.` })
    case "maxObjectKeys":
      return new JsonRefusal({ bound, reason: `An object in the ${what} has more than ${limits.maxObjectKeys} keys; send fewer.` })
    case "maxStringLength":
      return new JsonRefusal({ bound, reason: `A string in the ${what} is longer than ${limits.maxStringLength} characters; shorten it.` })
    case "maxNodes":
      return new JsonRefusal({ bound, reason: `The ${what} has more than ${limits.maxNodes} values; send a smaller request.` })
    case "prototypeKey":
      return new JsonRefusal({ bound, reason: `The ${what} has a "__proto__" key, which is not accepted; rename it.` })
    case "syntax":
      return new JsonRefusal({ bound, reason: `The ${what} is not valid JSON.` })
    case "loneSurrogate":
      return new JsonRefusal({ bound, reason: `A string in the ${what} is not well-formed Unicode (it has an unpaired surrogate); send valid UTF-8 text.` })
  }
}

/**
 * An unpaired UTF-16 surrogate (JSON's `\ud800` escapes allow one). Text is stored as UTF-8,
 * which cannot hold one: SQLite would keep the surrogate's invalid bytes and answer three
 * U+FFFD, while the commit log (JSON) keeps the escape, so a replica fed by the change feed
 * and one fed by a snapshot would disagree on the same record.
 */
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

// Character codes the scanner looks at.
const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const COMMA = 0x2c
const COLON = 0x3a
const MINUS = 0x2d
const PLUS = 0x2b
const DOT = 0x2e
const ZERO = 0x30
const NINE = 0x39

const isWhitespace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
const isDigit = (c: number) => c >= ZERO && c <= NINE
const isHex = (c: number) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
const simpleEscapes = new Set([QUOTE, BACKSLASH, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74])

/**
 * Scans `text` as JSON without building anything and returns the first exceeded bound,
 * or `undefined` when the text is JSON within bounds. Iterative (an explicit stack of
 * open containers), so nesting cannot overflow the call stack, and every character is
 * looked at a bounded number of times. A string scan stops as soon as it is too long.
 */
const scan = (text: string, limits: JsonBounds): JsonRefusalBound | undefined => {
  const n = text.length
  // Per open container: whether it is an object, and how many elements or members it has.
  const isObject: Array<boolean> = []
  const counts: Array<number> = []
  let i = 0
  let nodes = 0

  const skipWhitespace = () => {
    while (i < n && isWhitespace(text.charCodeAt(i))) i++
  }

  /** Scans the string starting at `i` (a quote); leaves `i` after it. Returns its length, or a refusal. */
  const string = (): number | JsonRefusalBound => {
    i++
    let length = 0
    for (;;) {
      if (i >= n) return "syntax"
      const c = text.charCodeAt(i)
      if (c === QUOTE) {
        i++
        return length
      }
      if (c < 0x20) return "syntax"
      if (c === BACKSLASH) {
        const e = text.charCodeAt(i + 1)
        if (e === 0x75) {
          // \uXXXX is one UTF-16 code unit, paired or not: JSON allows lone surrogates.
          if (!(isHex(text.charCodeAt(i + 2)) && isHex(text.charCodeAt(i + 3)) && isHex(text.charCodeAt(i + 4)) && isHex(text.charCodeAt(i + 5)))) {
            return "syntax"
          }
          i += 6
        } else if (simpleEscapes.has(e)) i += 2
        else return "syntax"
      } else i++
      if (++length > limits.maxStringLength) return "maxStringLength"
    }
  }

  const digits = (): boolean => {
    const start = i
    while (i < n && isDigit(text.charCodeAt(i))) i++
    return i > start
  }

  /** -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
  const number = (): boolean => {
    if (text.charCodeAt(i) === MINUS) i++
    if (text.charCodeAt(i) === ZERO) i++
    else if (!digits()) return false
    if (text.charCodeAt(i) === DOT) {
      i++
      if (!digits()) return false
    }
    const e = text.charCodeAt(i)
    if (e === 0x65 || e === 0x45) {
      i++
      const sign = text.charCodeAt(i)
      if (sign === PLUS || sign === MINUS) i++
      if (!digits()) return false
    }
    return true
  }

  const literal = (word: string): boolean => {
    if (text.startsWith(word, i)) {
      i += word.length
      return true
    }
    return false
  }

  /** Scans one object key and the colon after it; refuses `__proto__` however it is escaped. */
  const key = (): JsonRefusalBound | undefined => {
    skipWhitespace()
    if (text.charCodeAt(i) !== QUOTE) return "syntax"
    const start = i
    const length = string()
    if (typeof length !== "number") return length
    // Only a 9-character key can be "__proto__"; decoding it is cheap (at most 56 source characters).
    if (length === 9 && JSON.parse(text.slice(start, i)) === "__proto__") return "prototypeKey"
    if (++counts[counts.length - 1]! > limits.maxObjectKeys) return "maxObjectKeys"
    skipWhitespace()
    if (text.charCodeAt(i) !== COLON) return "syntax"
    i++
    return undefined
  }

  for (;;) {
    // Expecting a value.
    skipWhitespace()
    if (i >= n) return "syntax"
    if (++nodes > limits.maxNodes) return "maxNodes"
    const c = text.charCodeAt(i)
    if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (isObject.length >= limits.maxDepth) return "maxDepth"
      const object = c === OPEN_OBJECT
      i++
      skipWhitespace()
      if (text.charCodeAt(i) === (object ? CLOSE_OBJECT : CLOSE_ARRAY)) i++
      else {
        isObject.push(object)
        if (object) {
          counts.push(0)
          const refused = key()
          if (refused !== undefined) return refused
        } else {
          counts.push(1)
          if (limits.maxArrayLength < 1) return "maxArrayLength"
        }
        continue
      }
    } else if (c === QUOTE) {
      const length = string()
      if (typeof length !== "number") return length
    } else if (c === MINUS || isDigit(c)) {
      if (!number()) return "syntax"
    } else if (!(literal("true") || literal("false") || literal("null"))) return "syntax"

    // After a value: close containers or move to the next element or member.
    for (;;) {
      skipWhitespace()
      const depth = isObject.length
      if (depth === 0) return i === n ? undefined : "syntax"
      const object = isObject[depth - 1]!
      const next = text.charCodeAt(i)
      if (next === (object ? CLOSE_OBJECT : CLOSE_ARRAY)) {
        i++
        isObject.pop()
        counts.pop()
        continue
      }
      if (next !== COMMA) return "syntax"
      i++
      if (object) {
        const refused = key()
        if (refused !== undefined) return refused
      } else if (++counts[depth - 1]! > limits.maxArrayLength) return "maxArrayLength"
      break
    }
  }
}

/**
 * Parses `text` as JSON when it is valid JSON within `bounds`; otherwise refuses, naming
 * the first bound exceeded in text order. Linear in the length of the text. Objects with
 * a `__proto__` key are refused rather than dropped: `JSON.parse` makes it an own
 * property, but any later `Object.assign` or merge would turn it into a prototype change,
 * and silently dropping a key would change what the caller asked for.
 */
export const parse = (text: string, bounds: JsonBounds = defaultJsonBounds): Either.Either<unknown, JsonRefusal> => {
  const refused = scan(text, bounds)
  if (refused !== undefined) return Either.left(refuse(refused, bounds))
  // The scan accepted exactly JSON's grammar, so this cannot fail; a disagreement would
  // still only refuse, never escape as an exception.
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch {
    return Either.left(refuse("syntax", bounds))
  }
}

/**
 * The same bounds over a value already parsed (by a transport's own JSON parser, which is
 * native and linear): an iterative walk that stops at the first exceeded bound, so
 * nothing recursive (schema decoding, issue reports) ever sees a value outside them.
 * Every string, value or key, must also be well-formed Unicode (see `loneSurrogate`).
 * Only plain JSON values are expected; anything else counts as one value.
 */
export const check = (value: unknown, bounds: JsonBounds = defaultJsonBounds): Option.Option<JsonRefusal> => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  let nodes = 0
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (++nodes > bounds.maxNodes) return Option.some(refusal("maxNodes", bounds, "request"))
    if (typeof current === "string") {
      if (current.length > bounds.maxStringLength) return Option.some(refusal("maxStringLength", bounds, "request"))
      if (loneSurrogate.test(current)) return Option.some(refusal("loneSurrogate", bounds, "request"))
      continue
    }
    if (current === null || typeof current !== "object") continue
    if (depth + 1 > bounds.maxDepth) return Option.some(refusal("maxDepth", bounds, "request"))
    if (Array.isArray(current)) {
      if (current.length > bounds.maxArrayLength) return Option.some(refusal("maxArrayLength", bounds, "request"))
      for (const element of current) stack.push([element, depth + 1])
      continue
    }
    const keys = Object.keys(current)
    if (keys.length > bounds.maxObjectKeys) return Option.some(refusal("maxObjectKeys", bounds, "request"))
    for (const key of keys) {
      if (key === "__proto__") return Option.some(refusal("prototypeKey", bounds, "request"))
      if (key.length > bounds.maxStringLength) return Option.some(refusal("maxStringLength", bounds, "request"))
      if (loneSurrogate.test(key)) return Option.some(refusal("loneSurrogate", bounds, "request"))
      stack.push([(current as Record<string, unknown>)[key], depth + 1])
    }
  }
  return Option.none()
}

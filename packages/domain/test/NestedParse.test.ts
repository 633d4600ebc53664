// `nestedParse` answers exactly as Effect's strict parse: over random requests (valid ones, and
// valid ones broken in random places: extra keys, prototype-ish keys, missing fields, wrong types,
// arrays for objects and objects for arrays), every answer it gives itself is the value Effect
// gives (same keys in the same order, fresh objects and arrays where Effect makes them, the input's
// own values where Effect passes them on), everything else is Effect's own answer, and a valid
// request is answered without Effect's parse.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, ParseResult, Schema } from "effect"
import fc from "fast-check"
import { DescribeRequest } from "@cairn/domain/Describe"
import { MutateRequest } from "@cairn/domain/Mutate"
import { nestedParse, type StrictOptions } from "@cairn/domain/NestedParse"
import { QueryRequest } from "@cairn/domain/Query"
import { Filter } from "@cairn/domain/QueryDocument"
import { ChangesRequest, SnapshotRequest } from "@cairn/domain/Sync"

// ---------------------------------------------------------------------------------------------
// Mostly valid requests
// ---------------------------------------------------------------------------------------------

const name = fc.oneof({ weight: 6, arbitrary: fc.constantFrom("Task", "id", "title", "status", "assigneeId", "u1") }, { weight: 1, arbitrary: fc.string({ maxLength: 70 }) })
const path = fc.oneof({ weight: 6, arbitrary: fc.array(name, { minLength: 1, maxLength: 3 }) }, { weight: 1, arbitrary: fc.array(name, { maxLength: 18 }) })
const scalar = fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null))
const entityRef = fc.record({ kind: fc.constantFrom("entity", "entity", "trait"), name })
const { filter } = fc.letrec<{ filter: unknown }>((tie) => ({
  filter: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ op: fc.constantFrom("eq", "ne", "lt", "startsWith", "in"), path, value: scalar }),
    fc.record({ op: fc.constantFrom("in", "notIn", "eq"), path, value: fc.array(scalar, { maxLength: 3 }) }),
    fc.record({ op: fc.constant("isNull"), path }),
    fc.record({ op: fc.constantFrom("and", "or"), filters: fc.array(tie("filter"), { maxLength: 3 }) }),
    fc.record({ op: fc.constant("not"), filter: tie("filter") })
  )
}))
const queryDocument = fc.record(
  {
    version: fc.constantFrom(1, 1, 1, 2),
    from: entityRef,
    where: filter,
    select: fc.dictionary(name, fc.record({ path }), { maxKeys: 4 }),
    order: fc.array(fc.record({ path, direction: fc.constantFrom("asc", "desc", "up") }), { maxLength: 2 }),
    page: fc.record({ first: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.constantFrom(0, 1.5, -1)), after: fc.string({ maxLength: 4 }) }, { requiredKeys: [] })
  },
  { requiredKeys: ["version", "from", "select"] }
)
const queryRequest = fc.record({ ifCatalog: fc.string({ maxLength: 4 }), query: queryDocument }, { requiredKeys: ["query"] })

const uuid = fc.oneof(
  { weight: 4, arbitrary: fc.uuid({ version: 7 }) },
  { weight: 4, arbitrary: fc.uuid({ version: 7 }).map((u) => u.toUpperCase()) },
  { weight: 1, arbitrary: fc.uuid({ version: 4 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 4 }) }
)
const operationRef = fc.record({ kind: fc.constantFrom("operation", "operation", "operation", "entity"), owner: fc.record({ kind: fc.constantFrom("entity", "entity", "entity", "trait"), name }), name })
const mutateRequest = fc.record(
  {
    ifCatalog: fc.string({ maxLength: 4 }),
    operation: operationRef,
    target: fc.record({ kind: fc.constant("entity"), entity: name, id: fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), fc.constant("")) }),
    input: fc.oneof(fc.anything(), fc.constant(undefined)),
    invocationId: uuid
  },
  { requiredKeys: ["operation", "invocationId"] }
)
const definitionRef = fc.oneof(entityRef, fc.record({ kind: fc.constant("trait"), name }), operationRef)
const describeRequest = fc.record(
  {
    browse: fc.record({ kinds: fc.array(fc.constantFrom("entity", "trait", "operation", "field"), { maxLength: 3 }) }),
    search: fc.string({ maxLength: 5 }),
    inspect: fc.array(definitionRef, { maxLength: 3 }),
    page: fc.record({ limit: fc.integer({ min: 0, max: 5 }), after: fc.string({ maxLength: 3 }) }, { requiredKeys: [] })
  },
  { requiredKeys: [] }
)
const scope = fc.record({ entities: fc.array(fc.record({ from: entityRef, where: filter }, { requiredKeys: ["from"] }), { maxLength: 3 }) })
const snapshotRequest = fc.record({ ifCatalog: fc.string({ maxLength: 3 }), scope, after: fc.string({ maxLength: 3 }) }, { requiredKeys: ["scope"] })
const changesRequest = fc.record({ scope, cursor: fc.string({ maxLength: 3 }), live: fc.boolean() }, { requiredKeys: ["scope", "cursor"] })

// ---------------------------------------------------------------------------------------------
// Breaking a request in random places
// ---------------------------------------------------------------------------------------------

const oddKeys = ["extra", "__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "op", "kind", "path", "name", "0", "length"] as const
const junk = fc.oneof(
  fc.anything({ maxDepth: 1 }),
  fc.constantFrom<unknown>(undefined, null, 0, "", [], {}, { toString: 0 }, Symbol.for("s"), () => 1, new Date(0), Object.create(null))
)
const mutation = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom("extra", "symbol", "delete", "replace", "wrap", "swap", "sparse"),
  key: fc.constantFrom(...oddKeys),
  value: junk
})
type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never

/** An own property as JSON.parse makes one (so "__proto__" is a key, not the prototype). */
const define = (o: object, key: PropertyKey, value: unknown) =>
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true })

/**
 * A deep copy of a generated value: arrays, plain and null-prototype objects, dates. Breaking works
 * on copies only: generated values are shared (constants, values replayed while shrinking), and a
 * break made in one would carry into every later run (a cycle, or wrapping that deepens each run).
 */
const copy = (u: unknown): unknown => {
  if (Array.isArray(u)) return u.map(copy)
  if (u instanceof Date) return new Date(u.getTime())
  if (typeof u !== "object" || u === null) return u
  const proto = Object.getPrototypeOf(u)
  if (proto !== Object.prototype && proto !== null) return u
  const fresh = Object.create(proto) as object
  for (const [k, v] of Object.entries(u)) define(fresh, k, copy(v))
  return fresh
}

/** Every object or array inside `u` (itself included), each once. */
const containersOf = (u: unknown, seen = new Set<object>()): Set<object> => {
  if (typeof u === "object" && u !== null && !seen.has(u)) {
    seen.add(u)
    for (const key of Reflect.ownKeys(u)) containersOf((u as Record<PropertyKey, unknown>)[key], seen)
  }
  return seen
}


const broken = (valid: unknown, mutations: ReadonlyArray<Mutation>): unknown => {
  const root = { value: copy(valid) }
  for (const m of mutations) {
    const containers = [...containersOf(root)]
    const target = containers[m.at % containers.length] as Record<PropertyKey, unknown>
    const keys = Object.keys(target)
    // An empty array has no slot to break; an empty object gets the key added.
    if (keys.length === 0 && (Array.isArray(target) || m.kind !== "replace")) continue
    const key = keys.length === 0 ? m.key : keys[m.at % keys.length]!
    switch (m.kind) {
      case "extra":
        if (!Array.isArray(target) && target !== root) define(target, m.key, copy(m.value))
        break
      case "symbol":
        if (target !== root) define(target, Symbol.for(m.key), copy(m.value))
        break
      case "delete":
        delete target[key]
        break
      case "replace":
        define(target, key, copy(m.value))
        break
      case "wrap":
        define(target, key, m.at % 2 === 0 ? [target[key]] : define({}, m.key, target[key]))
        break
      case "swap": {
        const v = target[key]
        if (Array.isArray(v)) define(target, key, { ...v })
        else if (typeof v === "object" && v !== null) define(target, key, Object.values(v))
        break
      }
      case "sparse": {
        const v = target[key]
        if (Array.isArray(v)) v.length += 2
        break
      }
    }
  }
  return root.value
}

const requestLike = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 4, arbitrary: valid },
    { weight: 5, arbitrary: fc.tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([v, ms]) => broken(v, ms)) },
    { weight: 1, arbitrary: fc.anything() }
  )

// ---------------------------------------------------------------------------------------------
// Comparing answers
// ---------------------------------------------------------------------------------------------

/**
 * Asserts that `fast` is `effect` as Effect built it: primitives equal, the input's own objects
 * passed on where Effect passes them, fresh ones (same prototype, same own keys in the same
 * order, same values) where Effect makes them.
 */
const assertSame = (fast: unknown, effect: unknown, inputs: Set<object>, at = "") => {
  if (typeof effect !== "object" || effect === null) return assert.isTrue(Object.is(fast, effect), `${at}: ${String(fast)} vs ${String(effect)}`)
  assert.strictEqual(typeof fast, "object", at)
  assert.strictEqual(inputs.has(fast as object), inputs.has(effect), `${at}: fresh where Effect's is fresh`)
  if (inputs.has(effect)) return assert.strictEqual(fast, effect, at)
  assert.strictEqual(Object.getPrototypeOf(fast), Object.getPrototypeOf(effect), at)
  assert.deepStrictEqual(Reflect.ownKeys(fast as object), Reflect.ownKeys(effect), `${at}: keys`)
  for (const key of Reflect.ownKeys(effect)) {
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(fast, key)?.enumerable, Object.getOwnPropertyDescriptor(effect, key)?.enumerable, at)
    assertSame((fast as Record<PropertyKey, unknown>)[key], (effect as Record<PropertyKey, unknown>)[key], inputs, `${at}/${String(key)}`)
  }
}

const fallback = Symbol("fallback")

/** Whether any object inside `u` has an own "__proto__" key (which Effect's own parse, not this one, answers for records). */
const hasProtoKey = (u: unknown) => [...containersOf(u)].some((c) => Object.prototype.hasOwnProperty.call(c, "__proto__"))

/**
 * Checks `nestedParse` against Effect's parse with `options` on `input`: where it answers itself,
 * Effect succeeds with the same value; where Effect succeeds on a valid request (`complete`), it
 * answers itself. Returns whether it answered.
 */
const check = (schema: Schema.Schema<any, any>, options: StrictOptions, input: unknown, complete: boolean): boolean => {
  const effect = Schema.decodeUnknownEither(schema, options)
  const fast = nestedParse(schema.ast, options, () => Either.left(fallback))(input)
  let expected: Either.Either<unknown, ParseResult.ParseError> | "throws"
  try {
    expected = effect(input)
  } catch {
    expected = "throws"
  }
  if (Either.isRight(fast)) {
    assert.notStrictEqual(expected, "throws", "Effect's parse throws where the compiled one answered")
    assert.isTrue(Either.isRight(expected as Either.Either<unknown, unknown>), "Effect's parse fails where the compiled one answered")
    assertSame(fast.right, (expected as Either.Right<unknown, unknown>).right, containersOf(input))
    return true
  }
  assert.strictEqual(fast.left, fallback)
  if (complete && expected !== "throws" && Either.isRight(expected) && !hasProtoKey(input)) assert.fail("a request Effect accepts was not answered by the compiled parser")
  return false
}

const strictFirst: StrictOptions = { onExcessProperty: "error", errors: "first" }
const strictAll: StrictOptions = { onExcessProperty: "error", errors: "all" }

const requests: ReadonlyArray<readonly [string, Schema.Schema<any, any>, fc.Arbitrary<unknown>]> = [
  ["QueryRequest", QueryRequest, queryRequest],
  ["MutateRequest", MutateRequest, mutateRequest],
  ["DescribeRequest", DescribeRequest, describeRequest],
  ["SnapshotRequest", SnapshotRequest, snapshotRequest],
  ["ChangesRequest", ChangesRequest, changesRequest],
  ["Filter", Filter, filter]
]

describe("nestedParse", () => {
  for (const [label, schema, valid] of requests) {
    it(`answers as Effect's strict parse: ${label}`, () => {
      let answered = 0
      let accepted = 0
      fc.assert(
        fc.property(requestLike(valid), (input) => {
          if (check(schema, strictFirst, input, true)) answered++
          // Effect's parse may throw (a literal field holding an object without toString): not accepted.
          if (Either.isRight(Either.try(() => Schema.decodeUnknownEither(schema, strictFirst)(input)).pipe(Either.flatMap((e) => e)))) accepted++
        }),
        { numRuns: 400 }
      )
      // The comparison is only as good as the inputs: both outcomes must be common.
      assert.isAbove(answered, 20, "valid requests answered")
      assert.isAbove(400 - accepted, 40, "invalid requests seen")
    })
  }

  it("answers as Effect's strict parse reporting every error (the filter decoder's options)", () => {
    fc.assert(fc.property(requestLike(filter), (input) => void check(Filter, strictAll, input, true)), { numRuns: 300 })
  })

  it("answers valid requests written as JSON, prototype-ish keys included", () => {
    const texts = [
      `{"query":{"version":1,"from":{"kind":"entity","name":"Task"},"where":{"op":"eq","path":["assigneeId"],"value":"u1"},"select":{"id":{"path":["id"]},"constructor":{"path":["title"]},"toString":{"path":["status"]}},"page":{"first":50}}}`,
      `{"ifCatalog":"c","query":{"version":1,"from":{"kind":"entity","name":"Task"},"where":{"op":"and","filters":[{"op":"in","path":["status"],"value":["open",null,1]},{"op":"not","filter":{"op":"isNull","path":["project","name"]}}]},"select":{"0":{"path":["id"]},"b":{"path":["title"]},"1":{"path":["x"]}},"order":[{"path":["priority"],"direction":"desc"}],"page":{"after":"c"}}}`
    ]
    for (const text of texts) assert.isTrue(check(QueryRequest, strictFirst, JSON.parse(text), true), text)
    // Effect's own parse answers these: an own "__proto__" key where a record or struct is.
    for (const text of [
      `{"query":{"version":1,"from":{"kind":"entity","name":"Task"},"select":{"__proto__":{"path":["id"]}}}}`,
      `{"query":{"version":1,"from":{"kind":"entity","name":"Task","__proto__":{}},"select":{}}}`
    ]) {
      assert.isFalse(check(QueryRequest, strictFirst, JSON.parse(text), false), text)
    }
  })

  // Schemas beyond the requests: tuples, records with refined keys, unions Effect resolves by
  // order, transformations (sync, composed, effectful), and what is left to Effect entirely.
  const Tag = Schema.Struct({ k: Schema.Literal("x"), v: Schema.String })
  const generic: ReadonlyArray<readonly [string, Schema.Schema<any, any>, fc.Arbitrary<unknown>]> = [
    ["tuple", Schema.Tuple([Schema.String, Schema.optionalElement(Schema.Number)], Schema.Boolean), fc.array(fc.oneof(fc.string({ maxLength: 2 }), fc.integer(), fc.boolean()), { maxLength: 4 })],
    ["optional elements", Schema.Tuple(Schema.String, Schema.optionalElement(Schema.Number)), fc.array(fc.oneof(fc.string({ maxLength: 2 }), fc.integer()), { maxLength: 3 })],
    [
      "record with refined keys and fields",
      Schema.Struct({ id: Schema.String }, Schema.Record({ key: Schema.String.pipe(Schema.minLength(2)), value: Schema.Union(Schema.String, Schema.Number) })),
      fc.dictionary(fc.constantFrom("id", "ab", "a", "10", "2", "xyz"), fc.oneof(fc.string({ maxLength: 2 }), fc.integer(), fc.boolean()))
    ],
    ["record", Schema.Record({ key: Schema.String, value: Schema.Number }), fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 3 })],
    [
      "record over a transformed field",
      Schema.Struct({ n: Schema.NumberFromString }, Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number) })),
      fc.dictionary(fc.constantFrom("n", "m"), fc.constantFrom("1", 2, "x", true))
    ],
    [
      "symbol index",
      Schema.Record({ key: Schema.SymbolFromSelf, value: Schema.Number }),
      fc.tuple(fc.integer(), fc.boolean()).map(([n, b]) => (b ? { [Symbol.for("a")]: n } : { a: n }))
    ],
    [
      "union resolved by order",
      Schema.Struct({ v: Schema.Union(Schema.Struct({ a: Schema.NumberFromString }), Schema.Struct({ a: Schema.String }), Schema.Struct({ a: Schema.String, b: Schema.optional(Schema.Number) })) }),
      fc.record({ v: fc.record({ a: fc.constantFrom("1", "x", 1), b: fc.constantFrom(1, "1") }, { requiredKeys: [] }) })
    ],
    [
      "discriminated union with a shared tag",
      Schema.Array(Schema.Union(Tag, Schema.Struct({ k: Schema.Literal("x"), v: Schema.NumberFromString }), Schema.Struct({ k: Schema.Literal("y", 1), w: Schema.optional(Schema.String) }), Schema.Number)),
      fc.array(
        fc.oneof(
          fc.record({ k: fc.constantFrom("x", "x", "y"), v: fc.constantFrom("s", 2, "3") }),
          fc.record({ k: fc.constantFrom("x", "y", 1, "1", { toString: 0 }), v: fc.constantFrom("s", 2, "3"), w: fc.constantFrom("w", 3) }, { requiredKeys: [] }),
          fc.integer()
        ),
        { maxLength: 3 }
      )
    ],
    [
      "transformations",
      Schema.Struct({ n: Schema.NumberFromString, t: Schema.Trim, c: Schema.compose(Schema.NumberFromString, Schema.Int), l: Schema.optional(Schema.Lowercase) }),
      fc.record({ n: fc.constantFrom("1", "x", 1), t: fc.constantFrom(" a ", "b", 1), c: fc.constantFrom("2", "2.5", "y"), l: fc.constantFrom("AB", "ab", 3) }, { requiredKeys: ["n", "t", "c"] })
    ],
    [
      "exact optional and undefined",
      Schema.Struct({ a: Schema.optionalWith(Schema.String, { exact: true }), b: Schema.UndefinedOr(Schema.Number), c: Schema.Unknown, d: Schema.Struct({}) }),
      fc.record({ a: fc.constantFrom("a", undefined), b: fc.constantFrom(1, undefined, "1"), c: fc.anything(), d: fc.constantFrom({}, [], null, 1, { e: 1 }) }, { requiredKeys: [] })
    ]
  ]
  for (const [label, schema, valid] of generic) {
    it(`answers as Effect's strict parse: ${label}`, () => {
      fc.assert(fc.property(requestLike(valid), (input) => void check(schema, strictFirst, input, true)), { numRuns: 300 })
    })
  }

  it("leaves to Effect what it does not replay: effectful transformations, declarations, parse options of a node's own", () => {
    const Effectful = Schema.Struct({ n: Schema.transformOrFail(Schema.String, Schema.Number, { decode: (s) => Effect.succeed(s.length), encode: (n) => Effect.succeed(String(n)) }) })
    assert.isTrue(Either.isRight(Schema.decodeUnknownEither(Effectful, strictFirst)({ n: "abc" })))
    assert.isFalse(check(Effectful, strictFirst, { n: "abc" }, false), "an effect is Effect's to run")
    for (const schema of <ReadonlyArray<Schema.Schema<any, any>>>[
      Schema.Struct({ at: Schema.Date }),
      Schema.Struct({ id: Schema.String, tags: Schema.Array(Schema.String) }).annotations({ parseOptions: { onExcessProperty: "ignore" } }),
      Schema.Struct({ p: Schema.TemplateLiteral("a", Schema.String) })
    ]) {
      const parse = Schema.decodeUnknownEither(schema, strictFirst)
      assert.strictEqual(nestedParse(schema.ast, strictFirst, parse), parse, "not compiled: the parse itself")
    }
  })

  it("answers a recursive filter at any depth the filter check allows", () => {
    let deep: unknown = { op: "eq", path: ["id"], value: 1 }
    for (let i = 0; i < 500; i++) deep = i % 2 === 0 ? { op: "not", filter: deep } : { op: "and", filters: [deep, { op: "isNull", path: ["x"] }] }
    assert.isTrue(check(Filter, strictFirst, deep, true))
  })
})

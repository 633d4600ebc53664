/**
 * Page rows as the caller's objects, each made by one object literal: V8 gives such an
 * object its final shape at once, where adding the names one by one cost ~10× more (and
 * `Object.fromEntries` ~50×). The literal is generated per number of selections only;
 * names, decoders and columns are arguments, so no text a caller sent ever becomes code.
 */
type Decoder = (value: unknown) => unknown

export type RowBuilder = (row: ReadonlyArray<unknown>) => Record<string, unknown>

type Factory = (names: ReadonlyArray<string>, decoders: ReadonlyArray<Decoder>, columns: ReadonlyArray<number>) => RowBuilder

/** Past this many selections rows are built entry by entry (the budget allows 32 by default). */
const MAX_GENERATED = 64

const factories = new Map<number, Factory>()

const factoryFor = (n: number): Factory => {
  let factory = factories.get(n)
  if (factory === undefined) {
    const locals = Array.from({ length: n }, (_, i) => `const k${i} = k[${i}], d${i} = d[${i}], c${i} = c[${i}];`).join("\n")
    const literal = Array.from({ length: n }, (_, i) => `[k${i}]: d${i}(row[c${i}])`).join(", ")
    factory = new Function("k", "d", "c", `${locals}\nreturn (row) => ({ ${literal} })`) as Factory
    factories.set(n, factory)
  }
  return factory
}

export const rowBuilder = (names: ReadonlyArray<string>, decoders: ReadonlyArray<Decoder>, columns: ReadonlyArray<number>): RowBuilder =>
  names.length > MAX_GENERATED
    ? (row) => Object.fromEntries(names.map((name, i) => [name, decoders[i]!(row[columns[i]!])]))
    : factoryFor(names.length)(names, decoders, columns)

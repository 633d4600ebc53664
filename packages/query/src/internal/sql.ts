/**
 * A tiny builder for SQL text with positional parameters. The planner composes whole
 * statements (and repeats sub-statements) itself, so it needs fragments it can inspect
 * and reuse; values always travel as parameters, identifiers only via `ident`.
 */
import type { ValueOrder } from "@cairn/catalog"
import { Layout } from "@cairn/store"

/** What SQLite binds and stores: the stored values of `ValueOrder`. */
export type Bindable = ValueOrder.Stored

export interface Sql {
  readonly text: string
  readonly params: ReadonlyArray<Bindable>
}

export const raw = (text: string): Sql => ({ text, params: [] })

/** A bound value; booleans are stored as 0/1, so they are bound that way. */
export const param = (value: string | number | boolean | null): Sql => ({
  text: "?",
  params: [typeof value === "boolean" ? (value ? 1 : 0) : value]
})

/** A quoted catalog identifier (validated names only). */
export const ident = (name: string): Sql => raw(Layout.quote(name))

/** `alias."column"`. */
export const column = (alias: string, name: string): Sql => raw(`${Layout.quote(alias)}.${Layout.quote(name)}`)

export const sql = (strings: TemplateStringsArray, ...parts: ReadonlyArray<Sql>): Sql => {
  let text = strings[0]!
  const params: Array<Bindable> = []
  parts.forEach((part, i) => {
    text += part.text + strings[i + 1]!
    params.push(...part.params)
  })
  return { text, params }
}

export const join = (parts: ReadonlyArray<Sql>, separator: string): Sql => ({
  text: parts.map((p) => p.text).join(separator),
  params: parts.flatMap((p) => p.params)
})

export const TRUE = raw("1")
export const FALSE = raw("0")

/** Conjunction, dropping constant truths; empty means true. */
export const and = (parts: ReadonlyArray<Sql>): Sql => {
  const kept = parts.filter((p) => p !== TRUE)
  if (kept.some((p) => p === FALSE)) return FALSE
  return kept.length === 0 ? TRUE : kept.length === 1 ? kept[0]! : sql`(${join(kept, " AND ")})`
}

/** Disjunction, dropping constant falsehoods; empty means false. */
export const or = (parts: ReadonlyArray<Sql>): Sql => {
  const kept = parts.filter((p) => p !== FALSE)
  if (kept.some((p) => p === TRUE)) return TRUE
  return kept.length === 0 ? FALSE : kept.length === 1 ? kept[0]! : sql`(${join(kept, " OR ")})`
}

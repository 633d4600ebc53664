/**
 * The transactional API over the writer connection. Reads and writes go through raw
 * prepared statements (cached per connection) whose identifiers come from the compiled catalog only; every
 * write is folded into the invocation's change list (first before, last after).
 */
import { Effect, Either, Option, type ParseResult, Schema } from "effect"
import { uuidV7 as newId } from "@cairn/domain/Uuid"
import type { Catalog, CompiledEntity } from "@cairn/catalog/Catalog"
import * as Layout from "../Layout.js"
import type { Change } from "../Log.js"
import type { Tx } from "../Tx.js"
import type { Raw } from "./connection.js"

type Stored = Readonly<Record<string, unknown>>

interface Statements {
  readonly entity: CompiledEntity
  /** Parsers built once per entity: the record schema, strict about unknown fields when writing. */
  readonly decodeRecord: (u: unknown) => Either.Either<Record<string, unknown>, ParseResult.ParseError>
  readonly encodeRecord: (u: unknown) => Either.Either<Record<string, unknown>, ParseResult.ParseError>
  readonly columns: ReadonlyArray<string>
  readonly select: string
  readonly insert: string
  readonly update: string
  readonly remove: string
}

const byCatalog = new WeakMap<Catalog, ReadonlyMap<string, Statements>>()

/** Per-catalog prepared SQL text and parsers, built once per catalog (not per open database). */
export const statementsFor = (catalog: Catalog): ReadonlyMap<string, Statements> => {
  let statements = byCatalog.get(catalog)
  if (statements === undefined) {
    statements = buildStatements(catalog)
    byCatalog.set(catalog, statements)
  }
  return statements
}

const buildStatements = (catalog: Catalog): ReadonlyMap<string, Statements> =>
  new Map(
    catalog.entities.map((entity) => {
      const table = Layout.tableName(entity)
      const columns = ["id", ...entity.fields.map((f) => f.name)]
      const record = entity.definition.record as unknown as Schema.Schema<Record<string, unknown>, Record<string, unknown>>
      const list = columns.map(Layout.quote).join(", ")
      return [
        entity.name,
        {
          entity,
          decodeRecord: Schema.decodeUnknownEither(record) as Statements["decodeRecord"],
          encodeRecord: Schema.encodeUnknownEither(record, { onExcessProperty: "error" }) as Statements["encodeRecord"],
          columns,
          select: `SELECT ${list} FROM ${table} WHERE "id" = ?`,
          insert: `INSERT INTO ${table} (${list}) VALUES (${columns.map(() => "?").join(", ")})`,
          update: `UPDATE ${table} SET ${entity.fields.map((f) => `${Layout.quote(f.name)} = ?`).join(", ")} WHERE "id" = ?`,
          remove: `DELETE FROM ${table} WHERE "id" = ?`
        }
      ]
    })
  )

/** The changes of one invocation, keyed by row, in first-touched order. */
export class ChangeSet {
  private readonly rows = new Map<string, { entity: string; id: string; before: Stored | null; after: Stored | null }>()

  record(entity: string, id: string, before: Stored | null, after: Stored | null): void {
    const key = `${entity}\u0000${id}`
    const seen = this.rows.get(key)
    if (seen) seen.after = after
    else this.rows.set(key, { entity, id, before, after })
  }

  toArray(): ReadonlyArray<Change> {
    return [...this.rows.values()].filter((c) => c.before !== null || c.after !== null)
  }
}

/** A handler that gave up the thread mid-transaction: its late calls must never reach the connection. */
export class TransactionEnded extends Error {
  constructor() {
    super("The transaction ended while the operation still used it: an operation (or the mutation guard) waited for something asynchronous; only synchronous work may run inside the writer's transaction")
  }
}

export interface TxImpl extends Tx {
  /** The stored form of a record (`Layout.decodeRecord`), for the guard and target checks. */
  readonly getStored: (entity: string, id: string) => Effect.Effect<Option.Option<Stored>>
  /** Decodes a stored record with its entity's schema (a mismatch is a defect). */
  readonly decode: (entity: string, stored: Stored) => Effect.Effect<Record<string, unknown>>
  /** Ends this transactional view: every later call dies with `TransactionEnded`. */
  readonly end: () => void
}

const statementOf = (statements: ReadonlyMap<string, Statements>, name: string) => {
  const s = statements.get(name)
  if (!s) throw new Error(`unknown entity "${name}"`)
  return s
}

const decodeSync = (s: Statements, stored: Stored) => Either.getOrThrowWith(s.decodeRecord(stored), (e) => e)

/** Validates a whole record against the entity schema and returns its stored row. */
const toRow = (s: Statements, record: Record<string, unknown>) =>
  Layout.encodeRecord(s.entity, Either.getOrThrowWith(s.encodeRecord(record), (e) => e))

/** The `SELECT` of `findBy` and its parameters, from the entity's catalog identifiers only. */
const findQuery = (s: Statements, where: Readonly<Record<string, unknown>>) => {
  const clauses: Array<string> = []
  const params: Array<unknown> = []
  for (const [fieldName, value] of Object.entries(where)) {
    const field = fieldName === "id" ? undefined : s.entity.field(fieldName)
    if (fieldName !== "id" && !field) throw new Error(`unknown field "${s.entity.name}.${fieldName}"`)
    if (value === undefined || value === null) {
      clauses.push(`${Layout.quote(fieldName)} IS NULL`)
      continue
    }
    const encoded = field ? Schema.encodeUnknownSync(field.schema)(value) : value
    clauses.push(`${Layout.quote(fieldName)} = ?`)
    params.push(field ? Layout.encodeValue(field, encoded) : encoded)
  }
  const text = `SELECT ${s.columns.map(Layout.quote).join(", ")} FROM ${Layout.tableName(s.entity)}${
    clauses.length > 0 ? ` WHERE ${clauses.join(" AND ")}` : ""
  } ORDER BY "id"`
  return { text, params }
}

interface Live {
  live: boolean
}

const ensureLive = (state: Live) => {
  if (!state.live) throw new TransactionEnded()
}

/** A record's stored form (`Layout.decodeRecord`), if any. */
const storedIn = (raw: Raw, state: Live, s: Statements, id: string): Stored | undefined => {
  ensureLive(state)
  const row = raw.statement(s.select).get(id) as Record<string, unknown> | undefined
  return row === undefined ? undefined : Layout.decodeRecord(s.entity, row)
}

/**
 * The transactional API of one invocation over the raw write connection: every call is one
 * synchronous prepared statement (the writer runs the invocation without yielding to the
 * event loop). Once `end` is called, any call dies and touches nothing. Its methods are
 * shorthand methods over this call's state (no `this`: a handler may pass them around), and
 * its helpers live at module level: an invocation allocates this object and its change set only.
 */
export const makeTx = (raw: Raw, statements: ReadonlyMap<string, Statements>, changes: ChangeSet): TxImpl => {
  const state: Live = { live: true }
  const tx = {
    getStored(name: string, id: string) {
      return Effect.sync(() => Option.fromNullable(storedIn(raw, state, statementOf(statements, name), id) as Stored | null | undefined))
    },
    decode(name: string, record: Stored) {
      return Effect.sync(() => decodeSync(statementOf(statements, name), record))
    },
    get(name: string, id: string) {
      return Effect.sync(() => {
        const s = statementOf(statements, name)
        const found = storedIn(raw, state, s, id)
        return found === undefined ? Option.none() : Option.some(decodeSync(s, found))
      })
    },
    findBy(name: string, where: Readonly<Record<string, unknown>>) {
      return Effect.sync(() => {
        const s = statementOf(statements, name)
        const { params, text } = findQuery(s, where)
        ensureLive(state)
        const rows = raw.statement(text).all(...params) as Array<Record<string, unknown>>
        return rows.map((row) => decodeSync(s, Layout.decodeRecord(s.entity, row)))
      })
    },
    insert(name: string, fields: Readonly<Record<string, unknown>>) {
      return Effect.sync(() => {
        const s = statementOf(statements, name)
        const id = newId()
        const row = toRow(s, { ...fields, id })
        ensureLive(state)
        raw.statement(s.insert).run(...s.columns.map((c) => row[c]))
        changes.record(name, id, null, Layout.decodeRecord(s.entity, row))
        return id
      })
    },
    patch(name: string, id: string, fields: Readonly<Record<string, unknown>>) {
      return Effect.sync(() => {
        const s = statementOf(statements, name)
        const before = storedIn(raw, state, s, id)
        if (before === undefined) throw new Error(`patch of a missing ${name} record`)
        const current = decodeSync(s, before)
        const row = toRow(s, { ...current, ...fields, id })
        ensureLive(state)
        raw.statement(s.update).run(...s.entity.fields.map((f) => row[f.name]), id)
        const after = Layout.decodeRecord(s.entity, row)
        changes.record(name, id, before, after)
        return decodeSync(s, after)
      })
    },
    delete(name: string, id: string) {
      return Effect.sync(() => {
        const s = statementOf(statements, name)
        const before = storedIn(raw, state, s, id)
        if (before === undefined) return false
        raw.statement(s.remove).run(id)
        changes.record(name, id, before, null)
        return true
      })
    },
    end() {
      state.live = false
    }
  }
  return tx as unknown as TxImpl
}

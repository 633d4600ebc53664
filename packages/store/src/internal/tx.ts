/**
 * The transactional API over the writer connection. Reads and writes go through
 * prepared statements whose identifiers come from the compiled catalog only; every
 * write is folded into the invocation's change list (first before, last after).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, type Either, Option, type ParseResult, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"
import type { Catalog, CompiledEntity } from "@cairn/catalog/Catalog"
import * as Layout from "../Layout.js"
import type { Change } from "../Log.js"
import type { Tx } from "../Tx.js"

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

/** Per-catalog prepared SQL text, built once. */
export const statementsFor = (catalog: Catalog): ReadonlyMap<string, Statements> =>
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

const die = (message: string) => Effect.die(new Error(message))

export interface TxImpl extends Tx {
  /** The stored form of a record (`Layout.decodeRecord`), for the guard and target checks. */
  readonly getStored: (entity: string, id: string) => Effect.Effect<Option.Option<Stored>>
  /** Decodes a stored record with its entity's schema (a mismatch is a defect). */
  readonly decode: (entity: string, stored: Stored) => Effect.Effect<Record<string, unknown>>
}

export const makeTx = (
  sql: SqlClient.SqlClient,
  statements: ReadonlyMap<string, Statements>,
  changes: ChangeSet
): TxImpl => {
  const of = (name: string) => {
    const s = statements.get(name)
    return s ? Effect.succeed(s) : die(`unknown entity "${name}"`)
  }
  const run = <A extends object>(text: string, params: ReadonlyArray<unknown>) =>
    Effect.orDie(sql.unsafe<A>(text, params))

  const getStored = (name: string, id: string) =>
    Effect.flatMap(of(name), (s) =>
      Effect.map(run<Record<string, unknown>>(s.select, [id]), (rows) =>
        rows.length === 0 ? Option.none<Stored>() : Option.some<Stored>(Layout.decodeRecord(s.entity, rows[0]!))
      )
    )

  const decode = (name: string, stored: Stored) => Effect.flatMap(of(name), (s) => Effect.orDie(s.decodeRecord(stored)))

  /** Validates a whole record against the entity schema and returns its stored row. */
  const toRow = (s: Statements, record: Record<string, unknown>) =>
    Effect.map(Effect.orDie(s.encodeRecord(record)), (encoded) => Layout.encodeRecord(s.entity, encoded))

  const findBy = (name: string, where: Readonly<Record<string, unknown>>) =>
    Effect.gen(function* () {
      const s = yield* of(name)
      const clauses: Array<string> = []
      const params: Array<unknown> = []
      for (const [fieldName, value] of Object.entries(where)) {
        const field = fieldName === "id" ? undefined : s.entity.field(fieldName)
        if (fieldName !== "id" && !field) return yield* die(`unknown field "${name}.${fieldName}"`)
        if (value === undefined || value === null) {
          clauses.push(`${Layout.quote(fieldName)} IS NULL`)
          continue
        }
        const encoded = field ? yield* Effect.orDie(Schema.encodeUnknown(field.schema)(value)) : value
        clauses.push(`${Layout.quote(fieldName)} = ?`)
        params.push(field ? Layout.encodeValue(field, encoded) : encoded)
      }
      const text = `SELECT ${s.columns.map(Layout.quote).join(", ")} FROM ${Layout.tableName(s.entity)}${
        clauses.length > 0 ? ` WHERE ${clauses.join(" AND ")}` : ""
      } ORDER BY "id"`
      const rows = yield* run<Record<string, unknown>>(text, params)
      return yield* Effect.forEach(rows, (row) => decode(name, Layout.decodeRecord(s.entity, row)))
    })

  const insert = (name: string, fields: Readonly<Record<string, unknown>>) =>
    Effect.gen(function* () {
      const s = yield* of(name)
      const id = uuidv7()
      const row = yield* toRow(s, { ...fields, id })
      yield* run(s.insert, s.columns.map((c) => row[c]))
      changes.record(name, id, null, Layout.decodeRecord(s.entity, row))
      return id
    })

  const patch = (name: string, id: string, fields: Readonly<Record<string, unknown>>) =>
    Effect.gen(function* () {
      const s = yield* of(name)
      const before = yield* getStored(name, id)
      if (Option.isNone(before)) return yield* die(`patch of a missing ${name} record`)
      const current = yield* decode(name, before.value)
      const row = yield* toRow(s, { ...current, ...fields, id })
      yield* run(s.update, [...s.entity.fields.map((f) => row[f.name]), id])
      const after = Layout.decodeRecord(s.entity, row)
      changes.record(name, id, before.value, after)
      return yield* decode(name, after)
    })

  const remove = (name: string, id: string) =>
    Effect.gen(function* () {
      const s = yield* of(name)
      const before = yield* getStored(name, id)
      if (Option.isNone(before)) return false
      yield* run(s.remove, [id])
      changes.record(name, id, before.value, null)
      return true
    })

  const get = (name: string, id: string) =>
    Effect.flatMap(getStored(name, id), (stored) =>
      Option.isNone(stored) ? Effect.succeed(Option.none()) : Effect.map(decode(name, stored.value), Option.some)
    )

  return { get, findBy, insert, patch, delete: remove, getStored, decode } as unknown as TxImpl
}

/**
 * Strict decoders of the sync requests, beside `decodeQueryRequest` and held to the same
 * rules: unknown keys refused, every failure `invalid_query` naming its issues, and each
 * scope entry's `where` through the one bounded filter check (`checkFilter` of
 * `@cairn/query`) before anything recurses into it, so a filter is judged identically
 * whether it arrives in a query or a sync scope.
 */
import { ChangesRequest, maxSyncEntities, SnapshotRequest } from "@cairn/domain/Sync"
import { decodeStrict } from "@cairn/domain/Decode"
import { type InvalidQuery, type QueryBudgetExceeded } from "@cairn/domain/PublicError"
import { decodeFilter, malformed } from "@cairn/query/FilterDecoder"
import { type QueryLimits } from "@cairn/query/QueryLimits"
import { Effect, type Schema } from "effect"

const invalid = malformed("sync")

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Checks every scope entry's filter; more entries than a scope may hold fail before any is looked at. */
const checkScope = (raw: unknown): Effect.Effect<void, InvalidQuery | QueryBudgetExceeded, QueryLimits> =>
  Effect.gen(function* () {
    if (!isObject(raw) || !isObject(raw["scope"])) return
    const entities = raw["scope"]["entities"]
    if (!Array.isArray(entities)) return
    if (entities.length > maxSyncEntities) {
      return yield* invalid([{ path: "/scope/entities", message: `a scope holds at most ${maxSyncEntities} entities` }])
    }
    for (const [i, entry] of entities.entries()) {
      if (isObject(entry) && entry["where"] !== undefined) yield* decodeFilter(entry["where"], `/scope/entities/${i}/where`, invalid)
    }
  })

const decoder = <A, I>(schema: Schema.Schema<A, I, never>) => {
  const decode = decodeStrict(schema, invalid)
  return (raw: unknown): Effect.Effect<A, InvalidQuery | QueryBudgetExceeded, QueryLimits> =>
    // Suspended: a schema decodes as soon as it is called, and must not see an unchecked filter.
    Effect.zipRight(checkScope(raw), Effect.suspend(() => decode(raw)))
}

/** Decodes a raw snapshot request; every failure is `invalid_query` or `query_budget_exceeded`. */
export const decodeSnapshotRequest: (raw: unknown) => Effect.Effect<SnapshotRequest, InvalidQuery | QueryBudgetExceeded, QueryLimits> =
  decoder(SnapshotRequest)

/** Decodes a raw changes request; every failure is `invalid_query` or `query_budget_exceeded`. */
export const decodeChangesRequest: (raw: unknown) => Effect.Effect<ChangesRequest, InvalidQuery | QueryBudgetExceeded, QueryLimits> =
  decoder(ChangesRequest)

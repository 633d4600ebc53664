/**
 * Strict decoding of an untrusted `query` request (MCP arguments, raw JSON bodies):
 * unknown keys, a version other than 1, malformed filters and wrong shapes become
 * `invalid_query` whose issues point at the offending place. The filter goes through
 * the one bounded check (`FilterDecoder`) before anything recurses into it.
 */
import { Effect } from "effect"
import { decodeStrict, type InvalidQuery, type QueryBudgetExceeded, QueryRequest } from "@cairn/domain"
import { decodeFilter, malformed } from "./FilterDecoder.js"
import type { QueryLimits } from "./QueryLimits.js"

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const invalid = malformed("query")
const decodeRequest = decodeStrict(QueryRequest, invalid)

/** Decodes a raw `query` request; every failure is `invalid_query` (or a filter too large to look at). */
export const decodeQueryRequest = (raw: unknown): Effect.Effect<QueryRequest, InvalidQuery | QueryBudgetExceeded, QueryLimits> =>
  Effect.gen(function* () {
    if (isObject(raw) && isObject(raw["query"]) && raw["query"]["where"] !== undefined) {
      yield* decodeFilter(raw["query"]["where"], "/query/where", invalid)
    }
    return yield* decodeRequest(raw)
  })

/**
 * The query budgets: deterministic work limits (never wall-clock) that protect a
 * multi-tenant deployment. Defaults are deliberately small; raise one only on measured
 * workload evidence, through `layerConfig` (`CAIRN_QUERY_*` settings).
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Context, Layer } from "effect"

export interface QueryLimitsShape {
  /** `page.first` when the document gives none. */
  readonly defaultPageSize: number
  /** Largest `page.first`. */
  readonly maxPageSize: number
  /** Most entries in `select`. */
  readonly maxProjection: number
  /** Most relationship hops in one path (`["task", "project", "name"]` has two). */
  readonly maxPathDepth: number
  /**
   * Most nodes in a filter (every comparison and every and/or/not counts), for a query's
   * `where` and each sync scope entry's alike. It is also the depth bound: a filter is
   * never deeper than its node count, and it is counted without recursion.
   */
  readonly maxFilterNodes: number
  /** Most values in one `in`/`notIn` list (query and sync filters alike). */
  readonly maxInValues: number
  /** Most terms in `order`. */
  readonly maxOrderTerms: number
  /** Most candidate rows one page may examine before it fails `query_budget_exceeded`. */
  readonly maxRowsExamined: number
}

export const defaultQueryLimits: QueryLimitsShape = {
  defaultPageSize: 50,
  maxPageSize: 200,
  maxProjection: 32,
  maxPathDepth: 2,
  maxFilterNodes: 64,
  maxInValues: 100,
  maxOrderTerms: 4,
  maxRowsExamined: 10_000
}

/** The highest `maxFilterNodes` an operator may set: the deepest recursion a filter may cause. */
export const maxFilterNodesCeiling = 1000

const setting = (name: string, fallback: number) => positiveInteger(name).pipe(Config.withDefault(fallback))

export const queryLimitsConfig: Config.Config<QueryLimitsShape> = Config.all({
  defaultPageSize: setting("CAIRN_QUERY_DEFAULT_PAGE_SIZE", defaultQueryLimits.defaultPageSize),
  maxPageSize: setting("CAIRN_QUERY_MAX_PAGE_SIZE", defaultQueryLimits.maxPageSize),
  maxProjection: setting("CAIRN_QUERY_MAX_PROJECTION", defaultQueryLimits.maxProjection),
  maxPathDepth: setting("CAIRN_QUERY_MAX_PATH_DEPTH", defaultQueryLimits.maxPathDepth),
  maxFilterNodes: setting("CAIRN_QUERY_MAX_FILTER_NODES", defaultQueryLimits.maxFilterNodes),
  maxInValues: setting("CAIRN_QUERY_MAX_IN_VALUES", defaultQueryLimits.maxInValues),
  maxOrderTerms: setting("CAIRN_QUERY_MAX_ORDER_TERMS", defaultQueryLimits.maxOrderTerms),
  maxRowsExamined: setting("CAIRN_QUERY_MAX_ROWS_EXAMINED", defaultQueryLimits.maxRowsExamined)
}).pipe(
  // Filters are compiled and evaluated recursively, as deep as they have nodes.
  Config.validate({
    message: `CAIRN_QUERY_MAX_FILTER_NODES must be at most ${maxFilterNodesCeiling}`,
    validation: (l) => l.maxFilterNodes <= maxFilterNodesCeiling
  }),
  Config.validate({
    message: "CAIRN_QUERY_DEFAULT_PAGE_SIZE must not exceed CAIRN_QUERY_MAX_PAGE_SIZE",
    validation: (l) => l.defaultPageSize <= l.maxPageSize
  }),
  // A page that matches every row it reads still reads `first + 1` of them.
  Config.validate({
    message: "CAIRN_QUERY_MAX_ROWS_EXAMINED must exceed CAIRN_QUERY_MAX_PAGE_SIZE",
    validation: (l) => l.maxRowsExamined > l.maxPageSize
  })
)

/**
 * Required, never defaulted: a layer graph that forgets the budgets must not build, so
 * no deployment runs with limits nobody chose.
 */
export class QueryLimits extends Context.Tag("@cairn/query/QueryLimits")<QueryLimits, QueryLimitsShape>() {
  static readonly layer = (limits: Partial<QueryLimitsShape> = {}) =>
    Layer.succeed(QueryLimits, { ...defaultQueryLimits, ...limits })
  static readonly layerConfig = Layer.effect(QueryLimits, queryLimitsConfig)
}

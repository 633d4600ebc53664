/**
 * The one engine behind every transport. RPC (`/db/*`), MCP and sync call these three
 * functions with a verified principal; none of them talks to SQL or policy directly.
 */
import { Context, type Effect } from "effect"
import type {
  DescribeRequest,
  DescribeResult,
  MutateRequest,
  Overloaded,
  Principal,
  PublicError,
  QueryRequest,
  QueryResult,
  Receipt
} from "@cairn/domain"

export interface DataPlaneShape {
  readonly describe: (principal: Principal, request: DescribeRequest) => Effect.Effect<DescribeResult, PublicError>
  readonly query: (principal: Principal, request: QueryRequest) => Effect.Effect<QueryResult, PublicError>
  readonly mutate: (principal: Principal, request: MutateRequest) => Effect.Effect<Receipt, PublicError | Overloaded>
}

export class DataPlane extends Context.Tag("@cairn/server/DataPlane")<DataPlane, DataPlaneShape>() {}

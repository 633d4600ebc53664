/**
 * The typed data plane under `/db/*`: the same three capabilities the MCP tools
 * expose, as an @effect/rpc group. Server, generated bindings and clients share it.
 */
import { Rpc, RpcGroup } from "@effect/rpc"
import { DescribeRequest, DescribeResult } from "./Describe.js"
import { MutateRequest } from "./Mutate.js"
import { PublicError } from "./PublicError.js"
import { QueryRequest, QueryResult } from "./Query.js"
import { Receipt } from "./Receipt.js"

export class DataRpcs extends RpcGroup.make(
  Rpc.make("Describe", { payload: DescribeRequest, success: DescribeResult, error: PublicError }),
  Rpc.make("Query", { payload: QueryRequest, success: QueryResult, error: PublicError }),
  Rpc.make("Mutate", { payload: MutateRequest, success: Receipt, error: PublicError })
) {}

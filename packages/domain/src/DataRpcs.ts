/**
 * The typed data plane under `/db/*`: the same three capabilities the MCP tools
 * expose, as an @effect/rpc group. Server, generated bindings and clients share it.
 */
import { Rpc, RpcGroup } from "@effect/rpc"
import { Schema } from "effect"
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

/**
 * `DataRpcs` as it travels: the same tags, results and errors, but payloads are sent as
 * given and decoded once, by the server, strictly, like the MCP tools' arguments. A
 * malformed request is then a typed `InvalidQuery`/`InvalidInput` naming its issues,
 * for typed and untyped callers alike, never a client-side encoding defect.
 */
export class DataRpcsWire extends RpcGroup.make(
  Rpc.make("Describe", { payload: Schema.Unknown, success: DescribeResult, error: PublicError }),
  Rpc.make("Query", { payload: Schema.Unknown, success: QueryResult, error: PublicError }),
  Rpc.make("Mutate", { payload: Schema.Unknown, success: Receipt, error: PublicError })
) {}

/** Compile-time guard: the wire group answers exactly the tags, results and errors of `DataRpcs`. */
type Contract = RpcGroup.Rpcs<typeof DataRpcs>
type OnWire = RpcGroup.Rpcs<typeof DataRpcsWire>
type Answer<R, T> = R extends { readonly _tag: T } ? [Rpc.Success<R>, Rpc.Error<R>] : never
type Mismatched = {
  [T in Contract["_tag"] | OnWire["_tag"]]: [Answer<Contract, T>] extends [Answer<OnWire, T>]
    ? [Answer<OnWire, T>] extends [Answer<Contract, T>]
      ? never
      : T
    : T
}[Contract["_tag"] | OnWire["_tag"]]
export const wireMatchesContract: [Mismatched] extends [never] ? true : Mismatched = true

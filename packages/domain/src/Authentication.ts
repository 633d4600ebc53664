/**
 * RPC middleware that gives every `/db` handler its verified `CurrentPrincipal`. The
 * HTTP front verifies the bearer token before the RPC layer runs (so failures can be
 * real 401s); this tag is how the handlers receive the result.
 */
import { RpcMiddleware } from "@effect/rpc"
import { CurrentPrincipal } from "./CurrentPrincipal.js"

export class Authentication extends RpcMiddleware.Tag<Authentication>()("@cairn/domain/Authentication", {
  provides: CurrentPrincipal
}) {}

/**
 * Verified identity: turns a bearer token into a `Principal` for one resource (`db`
 * for the RPC data plane, `mcp` for the MCP endpoint). The database key comes from a
 * verified claim, never from the request. Layers that verify real tokens live beside
 * this contract; every transport depends only on the tag.
 */
import { Context, Data, type Effect } from "effect"
import type { Principal } from "@cairn/domain/Principal"

export type Resource = "db" | "mcp"

/**
 * Authentication failed. `description` is safe to show the caller (it names what is
 * wrong with the token, never a key, claim value or internal detail); transports map
 * this to 401 with `WWW-Authenticate`.
 */
export class Unauthorized extends Data.TaggedError("Unauthorized")<{
  readonly error: "invalid_request" | "invalid_token"
  readonly description: string
}> {}

export interface IdentityShape {
  /** Verifies a bearer token (without the `Bearer ` prefix) for the given resource. */
  readonly verify: (token: string, resource: Resource) => Effect.Effect<Principal, Unauthorized>
}

export class Identity extends Context.Tag("@cairn/server/Identity")<Identity, IdentityShape>() {}

/**
 * The query continuation cursor: the last row's sort key, sealed (AES-GCM under the
 * deployment secret) together with what it is valid for: the catalog token, a digest
 * of the principal (subject and database key, never the key itself), the database id
 * and the query's fingerprint. Anything else fails as a bad cursor.
 */
import { Effect, Option, Schema } from "effect"
import { digest } from "@cairn/catalog/Digest"
import { type SealerService } from "@cairn/catalog/Sealer"
import { CatalogChanged, InvalidQuery } from "@cairn/domain/PublicError"
import { type Principal } from "@cairn/domain/Principal"
import type { Bindable } from "./sql.js"

const PURPOSE = "query"

export interface CursorBinding {
  readonly catalogToken: string
  /** Whether a cursor issued under another token may continue: the query's definitions are unchanged for it. */
  readonly admits?: (token: string) => boolean
  readonly principal: Principal
  readonly database: string
  readonly fingerprint: () => string
}

const Payload = Schema.Struct({
  v: Schema.Literal(1),
  /** The catalog token, on its own so a stale cursor answers `catalog_changed`. */
  t: Schema.String,
  /** Digest of principal, database and query fingerprint. */
  b: Schema.String,
  /** The sort key of the last row sent. */
  k: Schema.Array(Schema.Union(Schema.Null, Schema.String, Schema.Number))
})

/** `digest({ p, d, f })` of the principal, database and fingerprint, its canonical JSON written out. */
const bindingDigest = (binding: CursorBinding) =>
  digest(
    `{"d":${JSON.stringify(binding.database)},"f":${JSON.stringify(binding.fingerprint())},"p":${JSON.stringify(principalDigest(binding.principal))}}`
  ).slice(0, 22)

/** By subject and database key: every request brings a new principal object for the same person. Bounded. */
const principalDigests = new Map<string, string>()
const PRINCIPAL_DIGESTS = 4096

export const principalDigest = (principal: Principal): string => {
  const key = JSON.stringify([principal.subject, principal.databaseKey])
  let found = principalDigests.get(key)
  if (found === undefined) {
    found = digest({ purpose: "query-cursor-principal", subject: principal.subject, database: digest(principal.databaseKey) })
    if (principalDigests.size >= PRINCIPAL_DIGESTS) principalDigests.delete(principalDigests.keys().next().value!)
    principalDigests.set(key, found)
  }
  return found
}

export const seal = (sealer: SealerService, binding: CursorBinding, keys: ReadonlyArray<Bindable>): string =>
  sealer.seal(PURPOSE, Payload, { v: 1 as const, t: binding.catalogToken, b: bindingDigest(binding), k: keys })

const invalid = (message: string) =>
  new InvalidQuery({ message: `/query/page/after: ${message}`, issues: [{ path: "/query/page/after", message }] })

/** Opens `sealed` for this binding; returns the sort key of the row it continues after. */
export const open = (
  sealer: SealerService,
  sealed: string,
  binding: CursorBinding,
  keyCount: number
): Effect.Effect<ReadonlyArray<Bindable>, InvalidQuery | CatalogChanged> => {
  const opened = sealer.open(PURPOSE, Payload, sealed)
  if (Option.isNone(opened)) {
    return Effect.fail(invalid("this is not a cursor this service issued; start again without page.after."))
  }
  const payload = opened.value
  if (payload.t !== binding.catalogToken && !(binding.admits?.(payload.t) ?? false)) {
    return Effect.fail(
      new CatalogChanged({
        message: "/query/page/after: the cursor was issued under an earlier catalog; call describe, then start again without page.after.",
        catalogToken: binding.catalogToken
      })
    )
  }
  if (payload.b !== bindingDigest(binding) || payload.k.length !== keyCount) {
    return Effect.fail(
      invalid("the cursor belongs to a different query, caller or database; repeat the exact query it came from (only page.first may change) or start again without page.after.")
    )
  }
  return Effect.succeed(payload.k)
}

/**
 * `mutate`, the engine every transport calls: validates the request against the
 * caller's visible catalog, names the intent, and hands it to the single writer of
 * the caller's database; answers with the durable receipt (or its stored refusal).
 */
import { Effect, Schema } from "effect"
import { validate as isUuid, version as uuidVersion } from "uuid"
import { digest, type View } from "@cairn/catalog"
import {
  CatalogChanged,
  decodeStrict,
  InvalidInput,
  type MutateRequest,
  type Principal,
  type Receipt,
  UnknownDefinition
} from "@cairn/domain"
import { activateForRequest, type Databases } from "./Databases.js"
import { operationKey } from "./OperationCatalog.js"
import * as Writer from "./Writer.js"

export interface MutateArgs {
  /** The caller's visible catalog: hidden operations are answered as nonexistent. */
  readonly view: View
  /** The verified caller; `databaseKey` selects the database. */
  readonly principal: Principal
  readonly request: MutateRequest
}

const isUuidV7 = (id: string) => isUuid(id) && uuidVersion(id) === 7

/** Digest of what makes two invocations the same intent. */
export const intentOf = (subject: string, operation: string, target: MutateRequest["target"], encodedInput: unknown) =>
  digest({ subject, operation, target: target ? { entity: target.entity, id: target.id } : null, input: encodedInput })

/**
 * Invokes one operation. Failures are the public errors of the spec, `Overloaded`
 * (retryable, nothing applied), or a defect carrying an `InternalError`.
 */
export const mutate = Effect.fn("Mutate.mutate")(function* ({ view, principal, request }: MutateArgs) {
  if (request.ifCatalog !== undefined && request.ifCatalog !== view.token) {
    return yield* new CatalogChanged({
      message: "The catalog changed since the token in ifCatalog was issued. Call describe, then rebuild the request.",
      catalogToken: view.token
    })
  }
  const ref = request.operation
  const operation = view.operation(ref.owner.name, ref.name)
  if (!operation) {
    return yield* new UnknownDefinition({
      message: `There is no operation "${ref.name}" on "${ref.owner.name}". Browse operations with describe and use an exact reference it returns.`
    })
  }
  const key = operationKey(operation)
  const target = request.target
  if (operation.targeted && !target) {
    return yield* new InvalidInput({
      message: `${key} acts on one existing ${operation.owner}: pass target { kind: "entity", entity: "${operation.owner}", id }.`,
      issues: [{ path: "/target", message: "is missing" }]
    })
  }
  if (!operation.targeted && target) {
    return yield* new InvalidInput({
      message: `${key} acts on no existing record: omit target.`,
      issues: [{ path: "/target", message: "must be omitted" }]
    })
  }
  if (target && target.entity !== operation.owner) {
    return yield* new InvalidInput({
      message: `${key} acts on a ${operation.owner}: target.entity must be "${operation.owner}".`,
      issues: [{ path: "/target/entity", message: `must be "${operation.owner}"` }]
    })
  }
  const input: unknown = yield* decodeStrict(
    operation.input,
    (issues) =>
      new InvalidInput({
        message: `The input does not match the input schema of ${key} (see issues); inspect the operation with describe.`,
        issues
      }),
    "/input"
  )(request.input ?? {})
  if (!isUuidV7(request.invocationId)) {
    return yield* new InvalidInput({
      message: "invocationId must be a UUIDv7 (time-ordered UUID) that names this one intent.",
      issues: [{ path: "/invocationId", message: "is not a UUIDv7" }]
    })
  }
  const invocationId = request.invocationId.toLowerCase()
  const encodedInput = yield* Effect.orDie(Schema.encode(operation.input)(input))
  const invocation: Writer.Invocation = {
    invocationId,
    operation,
    target,
    input,
    intent: intentOf(principal.subject, key, target, encodedInput),
    principal,
    catalogToken: view.token
  }
  // Replays pass the writer too: it answers them from the receipts in commit order.
  return yield* Effect.scoped(Effect.flatMap(activateForRequest(principal.databaseKey), (database) => database.submit(invocation)))
}) satisfies (args: MutateArgs) => Effect.Effect<Receipt, unknown, Databases>

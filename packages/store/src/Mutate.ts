/**
 * `mutate`: validates a request against the caller's visible catalog, names the intent,
 * and hands it to the single writer of the caller's already activated database; answers
 * with the durable receipt (or its stored refusal). Activation and `ifCatalog` are the
 * DataPlane's: they are the same for every request kind.
 */
import { Effect, type ParseResult, Schema } from "effect"
import { digest } from "@cairn/catalog/Digest"
import { type CompiledOperation } from "@cairn/catalog/Catalog"
import { type View } from "@cairn/catalog/View"
import { decodeStrict } from "@cairn/domain/Decode"
import { encodesAsIs } from "@cairn/domain/EncodesAsIs"
import { type InvocationConflict, InvalidInput, Inaccessible, type OperationRejected } from "@cairn/domain/PublicError"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { type Principal } from "@cairn/domain/Principal"
import { type Overloaded } from "@cairn/domain/Overloaded"
import { type Unavailable } from "@cairn/domain/Refusal"
import { type Receipt } from "@cairn/domain/Receipt"
import type { Database } from "./Database.js"
import { hotSpan } from "@cairn/domain/HotSpan"
import { operationKey } from "./OperationCatalog.js"
import * as Writer from "./Writer.js"

export interface MutateArgs {
  /** The caller's visible catalog: hidden operations are answered as nonexistent. */
  readonly view: View
  /** The verified caller. */
  readonly principal: Principal
  /** Decoded by `decodeMutateRequest`: its `invocationId` is a lowercased UUIDv7. */
  readonly request: MutateRequest
  /** The caller's database, activated (for the caller's scope) by the DataPlane. */
  readonly database: Database
  /**
   * Resolves what the decoded input only names (upload handles, see `File.Upload`) in the
   * caller's database, before the writer runs the handler; the intent stays that of the
   * input as sent.
   */
  readonly resolve?: (operation: CompiledOperation, input: unknown) => Effect.Effect<unknown, InvalidInput>
}

type MutateError = InvalidInput | Inaccessible | OperationRejected | InvocationConflict | Overloaded | Unavailable

/** Digest of what makes two invocations the same intent. */
export const intentOf = (subject: string, operation: string, target: MutateRequest["target"], encodedInput: unknown) =>
  digest({ subject, operation, target: target ? { entity: target.entity, id: target.id } : null, input: encodedInput })

interface Codec {
  readonly decode: (input: unknown) => Effect.Effect<unknown, InvalidInput>
  /** Encodes a decoded input; `undefined` when that gives the input back as is (see `encodesAsIs`). */
  readonly encode: ((input: unknown) => Effect.Effect<unknown, ParseResult.ParseError>) | undefined
}

/** Each operation's input parsers, built once (an operation is compiled once per catalog). */
const codecs = new WeakMap<CompiledOperation, Codec>()
const codecOf = (operation: CompiledOperation, key: string): Codec => {
  let codec = codecs.get(operation)
  if (codec === undefined) {
    const schema = operation.input as Schema.Schema<unknown, unknown>
    codec = {
      decode: decodeStrict(
        schema,
        (issues) =>
          new InvalidInput({
            message: `The input does not match the input schema of ${key} (see issues); inspect the operation with describe.`,
            issues
          }),
        "/input"
      ),
      encode: encodesAsIs(schema.ast) ? undefined : Schema.encode(schema)
    }
    codecs.set(operation, codec)
  }
  return codec
}

/**
 * Invokes one operation. Failures are the public errors of the spec, `Overloaded`
 * (retryable, nothing applied), or a defect carrying an `InternalError`.
 */
export const mutate = (args: MutateArgs) =>
  // The hot path of every write: a span (without a captured stack) only when a tracer is configured.
  hotSpan("Mutate.mutate")(mutateBody(args))

// Plain effects, not a generator: this runs once per write.
const mutateBody = (args: MutateArgs): Effect.Effect<Receipt, MutateError> =>
  Effect.suspend((): Effect.Effect<Receipt, MutateError> => {
    const { request, view } = args
    const ref = request.operation
    const operation = view.operation(ref.owner.name, ref.name)
    if (!operation) {
      return Effect.fail(
        // Hidden and nonexistent answer alike: `inaccessible`, revealing nothing (spec: authentication rule 3).
        new Inaccessible({
          message: `No operation named "${ref.owner.name}.${ref.name}" is available to you. Browse or search with describe to find exact references.`
        })
      )
    }
    const key = operationKey(operation)
    const target = request.target
    if (operation.targeted && !target) {
      return Effect.fail(
        new InvalidInput({
          message: `${key} acts on one existing ${operation.owner}: pass target { kind: "entity", entity: "${operation.owner}", id }.`,
          issues: [{ path: "/target", message: "is missing" }]
        })
      )
    }
    if (!operation.targeted && target) {
      return Effect.fail(
        new InvalidInput({
          message: `${key} acts on no existing record: omit target.`,
          issues: [{ path: "/target", message: "must be omitted" }]
        })
      )
    }
    if (target && target.entity !== operation.owner) {
      return Effect.fail(
        new InvalidInput({
          message: `${key} acts on a ${operation.owner}: target.entity must be "${operation.owner}".`,
          issues: [{ path: "/target/entity", message: `must be "${operation.owner}"` }]
        })
      )
    }
    const codec = codecOf(operation, key)
    return Effect.flatMap(codec.decode(request.input ?? {}), (input) =>
      codec.encode === undefined
        ? submitDecoded(args, operation, key, input, input)
        : Effect.flatMap(Effect.orDie(codec.encode(input)), (encodedInput) => submitDecoded(args, operation, key, input, encodedInput))
    )
  })

/**
 * Hands a decoded invocation to the writer (its input resolved first when the caller resolves
 * inputs); the intent is that of the input as sent. Replays pass the writer too: it answers them
 * from the receipts in commit order. Module level: a write allocates no closures for it.
 */
const submitDecoded = (
  { database, principal, request, resolve, view }: MutateArgs,
  operation: CompiledOperation,
  key: string,
  input: unknown,
  encodedInput: unknown
): Effect.Effect<Receipt, MutateError> => {
  const invocation = {
    invocationId: request.invocationId,
    operation,
    target: request.target,
    input,
    intent: intentOf(principal.subject, key, request.target, encodedInput),
    principal,
    catalogToken: view.token
  }
  return resolve
    ? Effect.flatMap(resolve(operation, input), (resolved) => database.submit({ ...invocation, input: resolved }))
    : database.submit(invocation)
}

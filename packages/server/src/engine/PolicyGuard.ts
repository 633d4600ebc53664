/**
 * The writer's mutation guard from the compiled policy: inside the invocation's
 * transaction, the target must lie in the principal's scope for the operation and every
 * id the input holds must name a record the principal may use there. A failure reads
 * exactly as a record that does not exist, so a hidden record is never revealed.
 */
import { Effect, Layer, Option } from "effect"
import type { Scalar } from "@cairn/domain/QueryDocument"
import { Inaccessible } from "@cairn/domain/PublicError"
import { MutationRule, type Policy } from "@cairn/policy"
import { permitsEffect, type RecordValue } from "@cairn/policy/Evaluate"
import { Writer } from "@cairn/store"
import { MutationGuard, type MutationGuardShape } from "@cairn/store/MutationGuard"
import { type TxRead } from "@cairn/store/Tx"
import { Deployment } from "./Deployment.js"

/** Reads for rule evaluation, through the invocation's transaction (its own writes included). */
const lookupIn =
  (tx: TxRead) =>
  (entity: string, field: string, value: Scalar): Effect.Effect<ReadonlyArray<RecordValue>> => {
    if (value === null) return Effect.succeed([])
    if (field === "id") {
      return typeof value === "string" ? Effect.map(tx.get(entity, value), Option.toArray) : Effect.succeed([])
    }
    return tx.findBy(entity, { [field]: value })
  }

export const policyGuard = (policy: Policy.CompiledPolicy): MutationGuardShape => ({
  check: ({ principal, operation, target, input, tx }) =>
    Effect.gen(function* () {
      const rule = policy.mutation(principal, operation.ref)
      // Mutate already answered operations outside the principal's view as inaccessible; a
      // denial reaching the writer means the view and the rule disagree: refuse, reveal nothing.
      if (rule._tag === "Deny") {
        return yield* new Inaccessible({ message: "This operation cannot be invoked by the caller. Browse operations with describe." })
      }
      const lookup = lookupIn(tx)
      const request = { input, ...(target ? { target } : {}) }
      if (rule.target && !(yield* permitsEffect(policy.catalog, operation.owner, MutationRule.allow(rule.target, []), request, lookup))) {
        return yield* Writer.targetInaccessible(operation.owner)
      }
      for (const reference of rule.references) {
        const permitted = yield* permitsEffect(policy.catalog, operation.owner, MutationRule.allow(undefined, [reference]), request, lookup)
        if (!permitted) {
          return yield* new Inaccessible({
            message: `No accessible ${reference.entity} has the id given in input.${reference.inputField}.`
          })
        }
      }
    })
})

/** The deployment's policy as the writer's guard; provide it to `Databases`. */
export const PolicyGuardLive = Layer.effect(
  MutationGuard,
  Effect.map(Deployment, (deployment) => policyGuard(deployment.policy))
)

// The tracker plus one test-only operation, `Member.remove` (admins only), so a browser test can
// revoke a membership: the shipped tracker has no way to remove one.
import { Operation, RootSchema } from "@cairn/catalog"
import { Policy, Rule } from "@cairn/policy"
import { type Handler } from "@cairn/store"
import { trackerHandlers } from "@cairn/tracker/handlers"
import { trackerPolicy } from "@cairn/tracker/policy"
import { tracker } from "@cairn/tracker/tracker"
import * as T from "@cairn/tracker/tracker"
import { Effect, Schema } from "effect"

export const MemberRemove = Operation.make({
  owner: T.Member,
  name: "remove",
  description: "Remove the target membership (test only).",
  targeted: true,
  input: Schema.Struct({}),
  output: Schema.Struct({})
})

export const trackerWithRemoval = {
  root: RootSchema.make("tracker", { traits: tracker.traits, entities: tracker.entities, operations: [...tracker.operations, MemberRemove] }),
  policy: Policy.make({
    entities: trackerPolicy.entities,
    operations: [...trackerPolicy.operations, Policy.operation(MemberRemove, { visible: Rule.hasRole("admin") })]
  }),
  handlers: {
    ...trackerHandlers,
    "Member.remove": ({ target, tx }: Handler.HandlerContext) => Effect.as(tx.delete("Member", target.id), {})
  },
  databases: [{ name: "tenants", schema: "tracker", keyClaim: "org", legacyKeys: true }]
} as const

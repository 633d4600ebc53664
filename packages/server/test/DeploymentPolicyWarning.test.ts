// A definition no policy rule names is hidden from everyone, admins included: safe, but
// silent. `Deployment.make` lists such definitions and `Deployment.layer` warns about them
// by name, once, when the deployment is assembled at startup.
import { assert, describe, it } from "@effect/vitest"
import { Policy } from "@cairn/policy"
import { Deployment, invisibleDefinitions, invisibleWarning } from "@cairn/server/engine/Deployment"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { Effect, Layer, Logger, LogLevel } from "effect"

/** The tracker with the rules for `Label` and `Comment.edit` left out. */
const withoutRules = {
  ...trackerDeployment,
  policy: Policy.make({
    entities: trackerDeployment.policy.entities.filter((e) => e.entity !== "Label"),
    operations: trackerDeployment.policy.operations.filter((o) => !(o.owner === "Comment" && o.name === "edit"))
  })
}

const warnings = (definition: Parameters<typeof Deployment.layer>[0]) =>
  Effect.gen(function* () {
    const logged: Array<string> = []
    const capture = Logger.make(({ logLevel, message }) => {
      if (LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) logged.push((Array.isArray(message) ? message : [message]).join(" "))
    })
    yield* Layer.build(Deployment.layer(definition)).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
    return logged
  })

describe("Deployment: definitions visible to no one", () => {
  it.effect("a policy with a rule for every definition leaves nothing invisible and logs nothing", () =>
    Effect.gen(function* () {
      const deployment = yield* Deployment.make(trackerDeployment)
      assert.deepStrictEqual(deployment.invisible, { entities: [], operations: [] })
      assert.strictEqual(invisibleWarning(deployment.invisible), undefined)
      assert.deepStrictEqual(yield* Effect.scoped(warnings(trackerDeployment)), [])
    }))

  it.effect("lists, by name, every entity and operation without a rule", () =>
    Effect.gen(function* () {
      const deployment = yield* Deployment.make(withoutRules)
      assert.deepStrictEqual(deployment.invisible, { entities: ["Label"], operations: ["Comment.edit"] })
      assert.deepStrictEqual(invisibleDefinitions(withoutRules.root, withoutRules.policy), deployment.invisible)
    }))

  it.effect("startup logs one warning naming them", () =>
    Effect.gen(function* () {
      const logged = yield* Effect.scoped(warnings(withoutRules))
      assert.deepStrictEqual(logged, [
        "Policy: entity Label and operation Comment.edit are visible to no one; add Policy.entity/Policy.operation rules"
      ])
    }))

  it("words one, several and each kind alone", () => {
    assert.strictEqual(
      invisibleWarning({ entities: ["Milestone"], operations: ["Milestone.close"] }),
      "Policy: entity Milestone and operation Milestone.close are visible to no one; add Policy.entity/Policy.operation rules"
    )
    assert.strictEqual(
      invisibleWarning({ entities: ["Milestone"], operations: [] }),
      "Policy: entity Milestone is visible to no one; add Policy.entity/Policy.operation rules"
    )
    assert.strictEqual(
      invisibleWarning({ entities: [], operations: ["Task.rename", "Task.assign"] }),
      "Policy: operations Task.rename, Task.assign are visible to no one; add Policy.entity/Policy.operation rules"
    )
  })
})

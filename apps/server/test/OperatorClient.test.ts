// How the operator's commands name a database: by the claims a token carries, mapped as identity
// maps a verified token (the tracker's legacy keys stay bare; namespaced ones need --db when several).
import { assert, describe, it } from "@effect/vitest"
import { DatabaseKey } from "@cairn/domain/Ids"
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { databaseId } from "@cairn/store/Databases"
import { trackerDeployment } from "@cairn/tracker/application"
import { Effect, Option } from "effect"
import { selectDatabase } from "../src/OperatorClient.js"

const two = {
  ...trackerDeployment,
  databases: [
    { name: "personal", schema: "tracker", keyClaim: "sub" },
    { name: "teams", schema: "tracker", keyClaim: "org" }
  ]
} satisfies DeploymentDefinition

describe("naming a database by a token's claims", () => {
  it.effect("the tracker's one legacy database deployment: the bare key, as before", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* selectDatabase(trackerDeployment, "acme", Option.none()), databaseId(DatabaseKey.make("acme")))
    }))

  it.effect("several database deployments: --db picks one, namespaced; none or an unknown one is refused, naming them", () =>
    Effect.gen(function* () {
      const teams = yield* selectDatabase(two, "acme", Option.some("teams"))
      assert.strictEqual(teams, databaseId(DatabaseKey.make("\u0000teams\u0000acme")))
      assert.notStrictEqual(yield* selectDatabase(two, "acme", Option.some("personal")), teams)
      assert.include(yield* Effect.flip(selectDatabase(two, "acme", Option.none())), "pass --db <name>")
      assert.include(yield* Effect.flip(selectDatabase(two, "acme", Option.some("nope"))), "personal, teams")
    }))
})

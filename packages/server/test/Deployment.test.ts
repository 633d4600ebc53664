// Deployment assembly: several database deployments are validated together at startup
// (schema names the root, key claim syntax, unique names, at most one legacy key space),
// with every problem listed at once.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { Deployment } from "../src/engine/Deployment.js"

describe("Deployment", () => {
  it.effect("accepts several database deployments and keeps their order", () =>
    Effect.gen(function* () {
      const deployment = yield* Deployment.make({
        ...trackerDeployment,
        databases: [
          { name: "tenants", schema: "tracker", keyClaim: "org", legacyKeys: true },
          { name: "personal", schema: "tracker", keyClaim: "sub" }
        ]
      })
      assert.deepStrictEqual(deployment.databases.map((db) => db.name), ["tenants", "personal"])
      assert.strictEqual(deployment.selectorClaim, "cairn_db")
    }))

  it.effect("lists every database deployment problem at once", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Deployment.make({
          ...trackerDeployment,
          selectorClaim: "org",
          databases: [
            { name: "tenants", schema: "tracker", keyClaim: "org", legacyKeys: true },
            { name: "tenants", schema: "notes", keyClaim: "bad claim", legacyKeys: true },
            { name: "Bad Name", schema: "tracker", keyClaim: "sub" }
          ]
        })
      )
      assert.strictEqual(error._tag, "CatalogError")
      const problems = (error as { problems: ReadonlyArray<string> }).problems.join("\n")
      for (const expected of [
        `"tenants": named twice`,
        `uses schema "notes", but the root schema is "tracker"`,
        `invalid key claim "bad claim"`,
        `"Bad Name": a name is lower-case`,
        `its key claim "org" is the selector claim`,
        "at most one database deployment may use legacy"
      ]) assert.include(problems, expected)
      const none = yield* Effect.flip(Deployment.make({ ...trackerDeployment, databases: [] }))
      assert.include((none as { problems: ReadonlyArray<string> }).problems.join("\n"), "at least one database deployment")
    }))
})

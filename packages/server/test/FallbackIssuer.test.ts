// `CAIRN_ISSUER` is read through one value: trimmed, and none when unset or blank.
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import { externalIssuer } from "../src/auth/FallbackIssuer.js"

const read = (env: Record<string, string>) => externalIssuer.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("externalIssuer", () => {
  it.effect("is the trimmed issuer, or none when unset or blank", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* read({ CAIRN_ISSUER: " https://id.example.com " }), Option.some("https://id.example.com"))
      assert.deepStrictEqual(yield* read({ CAIRN_ISSUER: "   " }), Option.none())
      assert.deepStrictEqual(yield* read({}), Option.none())
    })
  )
})

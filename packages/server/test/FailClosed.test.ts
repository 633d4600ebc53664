// Fail closed by construction: every service that authorizes, limits or gates is required,
// so a wiring that forgets one does not type-check (each `@ts-expect-error` below fails the
// build if the line ever compiles), and the complete wiring builds and answers.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { DescribeLimits } from "@cairn/catalog/Describe"
import { Sealer } from "@cairn/catalog/Sealer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { DatabaseKey } from "@cairn/domain/Ids"
import { Principal } from "@cairn/domain/Principal"
import { QueryLimits } from "@cairn/query/QueryLimits"
import { DataPlane } from "@cairn/server/engine/DataPlane"
import { DatabaseRouter } from "@cairn/server/engine/DatabaseRouter"
import { DatabasesLive } from "@cairn/server/engine/DatabasesLive"
import { Deployment } from "@cairn/server/engine/Deployment"
import { EngineLimitsLive } from "@cairn/server/engine/EngineLimits"
import { FallbackIssuer } from "@cairn/server/auth/FallbackIssuer"
import { IdentityConfigError, IdentityLive } from "@cairn/server/auth/IdentityLive"
import { Settings, type SettingsShape } from "@cairn/server/operations/Settings"
import { TestHookRoutes } from "@cairn/server/operations/TestHooks"
import { SyncConfig } from "@cairn/sync/SyncConfig"
import { trackerDeployment } from "@cairn/testkit/fixture/application"
import { Effect, Layer, Redacted } from "effect"

const settings: SettingsShape = {
  port: 0,
  host: "127.0.0.1",
  baseUrl: "http://127.0.0.1:1",
  dataDir: mkdtempSync(join(tmpdir(), "cairn-fail-closed-")),
  stageSetting: "test",
  stage: "test",
  stageExplicit: true,
  testHooksSetting: undefined
}
const base = Layer.mergeAll(DatabaseRouter.local, DatabasesLive).pipe(
  Layer.provideMerge(Layer.mergeAll(Deployment.layer(trackerDeployment), Sealer.layer(Redacted.make("fail-closed-secret-0123456789abcdef")), Settings.layer(settings)))
)

// The engine without the operator's budgets: QueryLimits, DescribeLimits and SyncConfig stay required.
const withoutLimits = DataPlane.Default.pipe(Layer.provide(base))
// @ts-expect-error the budgets have no default, so the engine cannot be built without them
export const noLimits: Layer.Layer<DataPlane, unknown, never> = withoutLimits
// @ts-expect-error one budget alone is not enough
export const onlyQueryLimits: Layer.Layer<DataPlane, unknown, never> = withoutLimits.pipe(Layer.provide(QueryLimits.layer()))
export const allLimits: Layer.Layer<DataPlane, unknown, never> = withoutLimits.pipe(
  Layer.provide([QueryLimits.layer(), DescribeLimits.layer(), SyncConfig.layer({})])
)

// Test-hook routes without the guard that decides them.
// @ts-expect-error TestHookRoutes needs the TestHooks guard
export const hooksWithoutGuard: Layer.Layer<never, unknown, Settings | import("@effect/platform").HttpLayerRouter.HttpRouter> = TestHookRoutes

// Identity without a decision about a missing CAIRN_ISSUER.
// @ts-expect-error IdentityLive needs a FallbackIssuer (the development one, or none)
export const identityWithoutFallback: Layer.Layer<import("@cairn/server/auth/Identity").Identity, unknown, Settings | Deployment> = IdentityLive

describe("fail closed", () => {
  it.scoped("the engine with every guard and budget builds and enforces them", () =>
    Effect.gen(function* () {
      const plane = yield* DataPlane.pipe(Effect.provide(DataPlane.Default.pipe(Layer.provide(EngineLimitsLive), Layer.provide(base))))
      const reader = new Principal({ subject: "alice", roles: [], claims: {}, scopes: ["cairn:read"], databaseKey: DatabaseKey.make("acme") })
      const refused = yield* Effect.flip(
        plane.mutate(reader, { operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" }, input: { name: "x" }, invocationId: "0192f000-0000-7000-8000-000000000001" })
      )
      assert.strictEqual(refused._tag, "InsufficientScope")
      const described = yield* plane.describe(new Principal({ subject: "alice", roles: [], claims: {}, scopes: [...accessScopes], databaseKey: DatabaseKey.make("acme") }), {
        browse: { kinds: ["entity"] },
        page: { limit: 100_000 }
      }).pipe(Effect.flip)
      // The discovery budget applies: a page beyond its maximum is refused, never silently served.
      assert.strictEqual(described._tag, "QueryBudgetExceeded")
    })
  )

  it.effect("without CAIRN_ISSUER and without a development fallback, identity does not start", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Layer.build(
          IdentityLive.pipe(
            Layer.provide(FallbackIssuer.none(new IdentityConfigError({ message: "Set CAIRN_ISSUER: this deployment trusts no development issuer." }))),
            Layer.provide([Settings.layer(settings), Deployment.layer(trackerDeployment)])
          )
        ).pipe(Effect.scoped)
      )
      assert.include(String((error as { message?: string }).message), "CAIRN_ISSUER")
    })
  )
})

/**
 * `GET /ready`: whether this instance should receive traffic, for orchestrators (`/health`
 * stays liveness). Ready means: the deployment finished starting (its catalog compiled, the
 * registry and its migrations opened, the issuer's keys loaded — the route exists only once
 * all of that succeeded), the data directory still accepts writes, and the server is not
 * shutting down. The answer names each check as ok or failing, never a path, catalog or datum.
 */
import { randomBytes } from "node:crypto"
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { DataPlane } from "../engine/DataPlane.js"
import { Identity } from "../auth/Identity.js"
import { refuseOtherMethods } from "./MethodNotAllowed.js"
import { Settings } from "../operations/Settings.js"

const writable = (dir: string): boolean => {
  const probe = join(dir, `.ready-${randomBytes(6).toString("hex")}`)
  try {
    writeFileSync(probe, "")
    rmSync(probe, { force: true })
    return true
  } catch {
    return false
  }
}

/** The `/ready` route. Needs `Settings`, the `DataPlane` (storage and migrations) and `Identity` (issuer keys). */
export const ReadinessRoute = HttpLayerRouter.use((router) =>
  Effect.gen(function* () {
    const settings = yield* Settings
    // Built only once storage, migrations and keys are: their presence is the check.
    yield* DataPlane
    yield* Identity
    const state = { stopping: false }
    yield* Effect.addFinalizer(() => Effect.sync(() => void (state.stopping = true)))
    yield* router.add(
      "GET",
      "/ready",
      Effect.sync(() => {
        const checks = {
          started: "ok",
          storage: "ok",
          issuerKeys: "ok",
          dataDirectory: writable(settings.dataDir) ? "ok" : "failing",
          accepting: state.stopping ? "failing" : "ok"
        }
        const ready = Object.values(checks).every((c) => c === "ok")
        return HttpServerResponse.unsafeJson(
          { status: ready ? "ready" : "not_ready", checks },
          { status: ready ? 200 : 503, headers: { "cache-control": "no-store" } }
        )
      })
    )
    yield* refuseOtherMethods(router, "/ready", ["GET"])
  })
)

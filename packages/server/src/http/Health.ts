/** `GET /health`: liveness only. It discloses no catalog, no data and no version. */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { refuseOtherMethods } from "./MethodNotAllowed.js"

export const HealthRoute = HttpLayerRouter.use((router) =>
  Effect.zipRight(
    router.add("GET", "/health", HttpServerResponse.unsafeJson({ status: "ok" }, { headers: { "cache-control": "no-store" } })),
    refuseOtherMethods(router, "/health", ["GET"])
  )
)

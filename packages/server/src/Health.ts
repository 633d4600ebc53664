/** `GET /health`: liveness only. It discloses no catalog, no data and no version. */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"

export const HealthRoute = HttpLayerRouter.add(
  "GET",
  "/health",
  HttpServerResponse.unsafeJson({ status: "ok" }, { headers: { "cache-control": "no-store" } })
)

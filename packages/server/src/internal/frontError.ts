/** Builds the front's JSON refusals (the `FrontErrorBody` contract of `@cairn/domain`). */
import { HttpServerResponse } from "@effect/platform"
import type { FrontErrorBody } from "@cairn/domain/FrontError"
import { requestIdHeader } from "../engine/Correlation.js"

export const frontError = (status: number, body: FrontErrorBody, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, {
    status,
    headers: { "cache-control": "no-store", [requestIdHeader]: body.requestId, ...headers }
  })

export const payloadTooLarge = (requestId: string, limitBytes: number) =>
  frontError(413, {
    error: "payload_too_large",
    message: `The request body is larger than the limit of ${limitBytes} bytes. Send a smaller request: fewer inputs per call, or split the work into several calls.`,
    requestId,
    limitBytes
  })

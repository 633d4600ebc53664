// CORS for `/db/*`: only origins on the operator's allowlist (`CAIRN_CORS_ORIGINS`, none by
// default) get a preflight answer and may read answers; any other Origin is refused by
// the same Host/Origin rule as `/mcp`. Through the real App.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { startApp } from "./support/app.js"

const describeBody = JSON.stringify({ _tag: "Request", id: "1", tag: "Describe", payload: { browse: { kinds: ["entity"] } }, headers: [] })

describe("CORS on /db/*", () => {
  it.scopedLive("an allowlisted origin gets its preflight and can read answers; others cannot", () =>
    Effect.gen(function* () {
      const app = yield* startApp({ env: { CAIRN_CORS_ORIGINS: "https://app.example.com, http://localhost:5173" } })
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const preflight = (origin: string, path = "/db/rpc") =>
        Effect.promise(() =>
          fetch(`${app.base}${path}`, {
            method: "OPTIONS",
            headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
          })
        )
      for (const path of ["/db/rpc", "/db/sync"]) {
        const allowed = yield* preflight("https://app.example.com", path)
        assert.strictEqual(allowed.status, 204, path)
        assert.strictEqual(allowed.headers.get("access-control-allow-origin"), "https://app.example.com")
        assert.include(allowed.headers.get("access-control-allow-headers") ?? "", "authorization")
        assert.include(allowed.headers.get("access-control-allow-methods") ?? "", "POST")
        assert.strictEqual(allowed.headers.get("vary"), "Origin")
      }
      const refused = yield* preflight("https://evil.example.com")
      assert.strictEqual(refused.status, 403)
      assert.isNull(refused.headers.get("access-control-allow-origin"))

      // Each route's preflight names what that route takes: TUS's methods and headers for a
      // resumable upload (tus-js-client's PATCH with Upload-Offset), ranges for a download.
      const routePreflight = (path: string, method: string, headers: string) =>
        Effect.promise(() =>
          fetch(`${app.base}${path}`, {
            method: "OPTIONS",
            headers: { origin: "https://app.example.com", "access-control-request-method": method, "access-control-request-headers": headers }
          })
        )
      const tusHeaders = ["authorization", "content-type", "tus-resumable", "upload-length", "upload-metadata", "upload-offset"]
      for (const [path, method] of [["/db/objects/resumable", "POST"], ["/db/objects/resumable/some-upload", "PATCH"], ["/db/objects/resumable/some-upload", "HEAD"]] as const) {
        const answer = yield* routePreflight(path, method, tusHeaders.join(", "))
        assert.strictEqual(answer.status, 204, `${method} ${path}`)
        assert.include(answer.headers.get("access-control-allow-methods") ?? "", method, path)
        const allowedHeaders = (answer.headers.get("access-control-allow-headers") ?? "").split(/,\s*/)
        for (const header of tusHeaders) assert.include(allowedHeaders, header, `${path}: ${header}`)
      }
      const download = yield* routePreflight("/db/objects/0192f000-0000-7000-8000-000000000001", "GET", "authorization, range, if-none-match")
      assert.strictEqual(download.status, 204)
      assert.include(download.headers.get("access-control-allow-headers") ?? "", "range")
      // A page reads TUS's answer headers (where the upload is, how far it got) and a download's.
      const created = yield* Effect.promise(() =>
        fetch(`${app.base}/db/objects/resumable`, {
          method: "POST",
          headers: { origin: "https://app.example.com", authorization: `Bearer ${token}`, "tus-resumable": "1.0.0", "upload-length": "5" }
        })
      )
      assert.strictEqual(created.status, 201)
      assert.strictEqual(created.headers.get("access-control-allow-origin"), "https://app.example.com")
      const exposed = (created.headers.get("access-control-expose-headers") ?? "").split(/,\s*/)
      for (const header of ["location", "upload-offset", "tus-resumable", "etag", "content-range", "x-request-id"]) assert.include(exposed, header)

      const post = (origin: string) =>
        Effect.promise(() =>
          fetch(`${app.base}/db/rpc`, {
            method: "POST",
            headers: { origin, authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: describeBody
          })
        )
      const ok = yield* post("http://localhost:5173")
      assert.strictEqual(ok.status, 200)
      assert.strictEqual(ok.headers.get("access-control-allow-origin"), "http://localhost:5173")
      assert.include(ok.headers.get("access-control-expose-headers") ?? "", "x-request-id")
      const foreign = yield* post("https://evil.example.com")
      assert.strictEqual(foreign.status, 403)
      assert.isNull(foreign.headers.get("access-control-allow-origin"))
      // A refusal an allowlisted page must be able to read carries the CORS headers too.
      const anonymous = yield* Effect.promise(() =>
        fetch(`${app.base}/db/rpc`, { method: "POST", headers: { origin: "https://app.example.com", "content-type": "application/json" }, body: describeBody })
      )
      assert.strictEqual(anonymous.status, 401)
      assert.strictEqual(anonymous.headers.get("access-control-allow-origin"), "https://app.example.com")
    })
  )

  it.scopedLive("by default no cross-site origin is allowed; same-origin pages are", () =>
    Effect.gen(function* () {
      const app = yield* startApp()
      const token = yield* app.token({ sub: "alice", org: "acme" })
      const refused = yield* Effect.promise(() =>
        fetch(`${app.base}/db/rpc`, { method: "OPTIONS", headers: { origin: "https://app.example.com", "access-control-request-method": "POST" } })
      )
      assert.strictEqual(refused.status, 403)
      const sameOrigin = yield* Effect.promise(() =>
        fetch(`${app.base}/db/rpc`, {
          method: "POST",
          headers: { origin: app.base, authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: describeBody
        })
      )
      assert.strictEqual(sameOrigin.status, 200)
    })
  )
})

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
